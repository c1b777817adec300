"""Registers this stage's `fleetscope` commands (see fleetscope.cli).

    fleetscope server [--host H] [--port P]     ingest server + writer + maintenance
    fleetscope token create|revoke|list NAME    agent bearer tokens in the catalog
    fleetscope warehouse migrate                apply telemetry migrations (server stopped)
    fleetscope warehouse query SQL              read through the segments, from any process

Nothing heavy is imported at module level: handlers import DuckDB and SQLAlchemy when they run.
"""

from __future__ import annotations

import argparse
from typing import Any

from fleetscope.settings import Settings


def register(subparsers: Any) -> None:
    server = subparsers.add_parser("server", help="run the ingest server (writer, HTTP, upkeep)")
    server.add_argument("--host", help="listen address (default: server.host)")
    server.add_argument("--port", type=int, help="listen port (default: server.port)")
    server.set_defaults(handler=run_server)

    token = subparsers.add_parser("token", help="manage agent bearer tokens")
    actions = token.add_subparsers(dest="token_command", metavar="ACTION", required=True)
    create = actions.add_parser("create", help="create a token and print it (shown only once)")
    create.add_argument("name")
    create.set_defaults(handler=token_create)
    revoke = actions.add_parser("revoke", help="revoke a token by name")
    revoke.add_argument("name")
    revoke.set_defaults(handler=token_revoke)
    actions.add_parser("list", help="list token names and states").set_defaults(handler=token_list)

    warehouse = subparsers.add_parser("warehouse", help="telemetry store maintenance and queries")
    wactions = warehouse.add_subparsers(dest="warehouse_command", metavar="ACTION", required=True)
    wactions.add_parser("migrate", help="apply telemetry schema migrations").set_defaults(
        handler=warehouse_migrate
    )
    query = wactions.add_parser("query", help="run SQL over the published segments")
    query.add_argument("sql")
    query.add_argument("--format", choices=["csv", "json"], default="csv")
    query.set_defaults(handler=warehouse_query)


def run_server(args: argparse.Namespace, settings: Settings) -> int:
    from warehouse.runtime import Server

    Server(settings, host=args.host, port=args.port).serve_until_signalled()
    return 0


def _catalog(settings: Settings) -> Any:
    from warehouse import catalog
    from warehouse.paths import WarehousePaths

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
    from warehouse.paths import WarehousePaths
    from warehouse.writer import open_database

    path = WarehousePaths.from_settings(settings).duckdb_path
    conn = open_database(path)
    try:
        print(f"{path}: schema versions {applied(conn)}")
    finally:
        conn.close()
    return 0


def warehouse_query(args: argparse.Namespace, settings: Settings) -> int:
    import csv
    import json
    import sys

    import duckdb

    from fleetscope.errors import ConfigError
    from warehouse.reader import connect

    conn = connect(settings)
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
