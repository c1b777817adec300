"""Registers this stage's `fleetscope` commands (see app.cli).

    fleetscope server [--host H] [--port P]     ingest server + writer + maintenance
    fleetscope token create|revoke|list NAME    agent bearer tokens in the catalog
    fleetscope warehouse migrate                apply telemetry migrations (server stopped)
    fleetscope warehouse query SQL              read through the segments, from any process
    fleetscope import prometheus --url U --start T --end T   backfill from Prometheus's HTTP API

Nothing heavy is imported at module level: handlers import DuckDB and SQLAlchemy when they run.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fleetscope.settings import Settings


def register(subparsers: Any) -> None:
    """Every command of this module (each is also its own entry point, app/commands/)."""
    register_server(subparsers)
    register_token(subparsers)
    register_warehouse(subparsers)
    register_import(subparsers)


def register_server(subparsers: Any) -> None:
    server = subparsers.add_parser("server", help="Run the ingest server (writer, HTTP, upkeep).")
    server.add_argument("--host", help="listen address (default: server.host)")
    server.add_argument("--port", type=int, help="listen port (default: server.port)")
    server.add_argument(
        "--mode",
        choices=["embedded", "fleet"],
        help="embedded (DuckDB file) or fleet (Iceberg gateway) (default: server.mode)",
    )
    server.set_defaults(handler=run_server)


def register_token(subparsers: Any) -> None:
    token = subparsers.add_parser("token", help="Manage agent bearer tokens.")
    actions = token.add_subparsers(dest="token_command", metavar="ACTION", required=True)
    create = actions.add_parser("create", help="create a token and print it (shown only once)")
    create.add_argument("name")
    create.set_defaults(handler=token_create)
    revoke = actions.add_parser("revoke", help="revoke a token by name")
    revoke.add_argument("name")
    revoke.set_defaults(handler=token_revoke)
    actions.add_parser("list", help="list token names and states").set_defaults(handler=token_list)


def register_warehouse(subparsers: Any) -> None:
    warehouse = subparsers.add_parser("warehouse", help="Telemetry store maintenance and queries.")
    wactions = warehouse.add_subparsers(dest="warehouse_command", metavar="ACTION", required=True)
    wactions.add_parser("migrate", help="apply telemetry schema migrations").set_defaults(
        handler=warehouse_migrate
    )
    query = wactions.add_parser("query", help="run SQL over the published segments")
    query.add_argument("sql")
    query.add_argument("--format", choices=["csv", "json"], default="csv")
    query.add_argument(
        "--days", type=float, default=7.0, help="fleet mode: days of data to read (default 7)"
    )
    query.set_defaults(handler=warehouse_query)


def register_import(subparsers: Any) -> None:
    importer = subparsers.add_parser("import", help="Backfill telemetry from another system.")
    sources = importer.add_subparsers(dest="import_source", metavar="SOURCE", required=True)
    prom = sources.add_parser(
        "prometheus",
        help="backfill gpu_samples from dcgm-exporter series in Prometheus (query_range)",
        description="Query Prometheus's HTTP API in chunks and send gpu_samples batches to "
        "ingest; re-running the same import stores nothing twice.",
    )
    prom.add_argument("--url", required=True, help="Prometheus base URL, e.g. http://prom:9090")
    prom.add_argument("--start", required=True, help="RFC 3339 time with offset, or Unix seconds")
    prom.add_argument("--end", required=True, help="RFC 3339 time with offset, or Unix seconds")
    prom.add_argument("--step", default="10s", help="resolution, >= scrape interval (10s)")
    prom.add_argument(
        "--match",
        action="append",
        help='series selector, repeatable (default: {__name__=~"DCGM_FI_.*"})',
    )
    prom.add_argument("--chunk", default="15m", help="time span per query (15m; <= 11,000 steps)")
    prom.add_argument("--ingest-url", help="ingest server (default: agent.ingest_url)")
    prom.add_argument("--token", help="bearer token for ingest (default: agent.token)")
    prom.add_argument(
        "--cluster", help="for series without a cluster label (default: server.prometheus_cluster)"
    )
    prom.set_defaults(handler=import_prometheus)


def run_server(args: argparse.Namespace, settings: Settings) -> int:
    mode = args.mode or settings.server.mode
    keep_private(settings)
    if mode == "fleet":
        from warehouse.fleet.gateway import Gateway

        Gateway(settings, host=args.host, port=args.port).serve_until_signalled()
        return 0
    if mode != "embedded":
        from fleetscope.errors import ConfigError

        raise ConfigError(f"server.mode must be embedded or fleet, got {mode!r}")
    from warehouse.ingest.runtime import Server

    Server(settings, host=args.host, port=args.port).serve_until_signalled()
    return 0


def keep_private(settings: Settings) -> None:
    """Whatever the umask, what the server writes is 0600 in 0700 folders (fleetscope.private):
    the umask for new files, and the data folder, DuckDB file and segments an earlier version
    left readable tightened."""
    from fleetscope.private import private_dir, restrict_umask, tighten
    from warehouse.storage.paths import WarehousePaths

    restrict_umask()
    tighten(private_dir(settings.path(settings.core.data_dir)))
    paths = WarehousePaths.from_settings(settings)
    for path in (paths.duckdb_path, paths.duckdb_path.with_name(paths.duckdb_path.name + ".wal")):
        tighten(path)
    tighten(paths.segments_dir)


def _catalog(settings: Settings) -> Any:
    from warehouse import catalog
    from warehouse.storage.paths import WarehousePaths

    return catalog.connect(WarehousePaths.from_settings(settings).catalog_url)


def token_create(args: argparse.Namespace, settings: Settings) -> int:
    from warehouse.catalog.tokens import create_token

    with _catalog(settings).begin() as conn:
        print(create_token(conn, args.name))
    return 0


def token_revoke(args: argparse.Namespace, settings: Settings) -> int:
    from warehouse.catalog.tokens import revoke_token

    with _catalog(settings).begin() as conn:
        revoke_token(conn, args.name)
    print(f"revoked {args.name}")
    return 0


def token_list(args: argparse.Namespace, settings: Settings) -> int:
    from warehouse.catalog.tokens import list_tokens

    with _catalog(settings).connect() as conn:
        for info in list_tokens(conn):
            state = f"revoked {info.revoked_at:%Y-%m-%d}" if info.revoked_at else "active"
            print(f"{info.name}\t{info.created_at:%Y-%m-%d %H:%M:%S}Z\t{state}")
    return 0


def warehouse_migrate(args: argparse.Namespace, settings: Settings) -> int:
    from warehouse.migrations import applied
    from warehouse.storage.paths import WarehousePaths
    from warehouse.storage.writer import open_database

    path = WarehousePaths.from_settings(settings).duckdb_path
    conn = open_database(path)
    try:
        print(f"{path}: schema versions {applied(conn)}")
    finally:
        conn.close()
    return 0


def _read_connection(args: argparse.Namespace, settings: Settings) -> Any:
    """Embedded: the published segments. Fleet: DuckDB over the Iceberg scan of the last
    `--days` days (partition pruning keeps the rest unread)."""
    if settings.server.mode != "fleet":
        from warehouse.read.reader import connect

        return connect(settings)
    from datetime import UTC, datetime, timedelta

    from warehouse.fleet import reader
    from warehouse.fleet.tables import FleetConfig, FleetTables

    now = datetime.now(UTC)
    tables = FleetTables(FleetConfig.from_settings(settings))
    return reader.connect(tables, now - timedelta(days=args.days), now + timedelta(days=1))


def warehouse_query(args: argparse.Namespace, settings: Settings) -> int:
    import csv
    import json
    import sys

    import duckdb

    from fleetscope.errors import ConfigError

    conn = _read_connection(args, settings)
    try:
        table = conn.sql(args.sql).to_arrow_table()
    except duckdb.Error as exc:
        raise ConfigError(f"query failed: {exc}") from exc
    names = table.column_names
    rows = [[str(v) if v is not None else "" for v in row.values()] for row in table.to_pylist()]
    if args.format == "json":
        print(json.dumps([dict(zip(names, r, strict=True)) for r in rows]))
    else:
        writer = csv.writer(sys.stdout)
        writer.writerow(names)
        writer.writerows(rows)
    return 0


def _catalog_clusters(settings: Settings) -> Callable[[str], str | None] | None:
    """host -> the cluster this machine's catalog knows it by (agents report theirs), so imported
    series without a `cluster` label join their host's cluster; None where there is no catalog
    here (an import run from another machine), and a catalog that cannot be read knows nothing."""
    from sqlalchemy.exc import SQLAlchemyError

    from warehouse import catalog
    from warehouse.catalog.fleet import HostClusters
    from warehouse.storage.paths import WarehousePaths

    url = WarehousePaths.from_settings(settings).catalog_url
    if url.startswith("sqlite:///") and not Path(url.removeprefix("sqlite:///")).exists():
        return None
    known = HostClusters(catalog.connect(url))

    def cluster_of(host: str) -> str | None:
        try:
            return known(host)
        except SQLAlchemyError:
            return None

    return cluster_of


def import_prometheus(args: argparse.Namespace, settings: Settings) -> int:
    from warehouse.prometheus.importer import (
        DEFAULT_MATCH,
        MAX_POINTS,
        ImportPlan,
        IngestClient,
        PrometheusAPI,
        parse_duration_ms,
        parse_time_ms,
        run_import,
    )

    step_ms = parse_duration_ms(args.step, what="--step")
    chunk_ms = parse_duration_ms(args.chunk, what="--chunk")
    plan = ImportPlan(
        prometheus_url=args.url,
        start_ms=parse_time_ms(args.start, what="--start"),
        end_ms=parse_time_ms(args.end, what="--end"),
        step_ms=step_ms,
        chunk_points=max(1, min(MAX_POINTS, chunk_ms // step_ms)),
        matches=tuple(args.match or [DEFAULT_MATCH]),
        cluster=args.cluster or settings.server.prometheus_cluster,
    )
    result = run_import(
        plan,
        PrometheusAPI(args.url),
        IngestClient(
            args.ingest_url or settings.agent.ingest_url,
            args.token if args.token is not None else settings.agent.token,
        ),
        progress=print,
        known_cluster=None if args.cluster else _catalog_clusters(settings),
    )
    print(
        f"imported {result.rows} rows in {result.batches} batches over {result.chunks} chunks "
        f"({result.duplicate_batches} batches were already stored)"
    )
    return 0
