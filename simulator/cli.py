"""`fleetscope simulate`: serve a simulated fleet's dcgm-exporter pages, or generate its tables.

Live: `fleetscope simulate [--hosts N] [--base-port P] [--seed S] [--truth PATH] [--record-dir D]
[--duration S] [--ingest-url URL --token T] [--sdk-socket-dir DIR | --sdk-socket TEMPLATE]`
serves every host on 127.0.0.1 and prints one "<host> <url>" line per host; with an SDK socket,
the simulated training processes send step datagrams to each host's agent (`DIR/<host>.sock`, or
the template with `{host}` and `{index}`). Batch: `fleetscope simulate --generate OUT_DIR --days D
--gpus G --step-s S [--start ISO]` writes gpu_samples.parquet, host_samples.parquet, step_samples.parquet,
jobs.jsonl and truth.jsonl into OUT_DIR.

Must never: import anything heavy at module level (app.cli's rule); numpy and pyarrow
load inside the handlers.
"""

from __future__ import annotations

import argparse
import json
import math
import signal
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fleetscope.errors import ConfigError

if TYPE_CHECKING:
    from fleetscope.settings import Settings

DEFAULT_START = "2026-01-05T00:00:00+00:00"  # a Monday: weekly reports get a whole week


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "simulate",
        help="Serve simulated dcgm-exporter endpoints, or generate a simulated fleet's tables.",
        description=__doc__.split("\n\n")[1] if __doc__ else None,
    )
    parser.add_argument("--hosts", type=int, help="hosts of 8 GPUs (default: simulator.hosts)")
    parser.add_argument("--base-port", type=int, help="first port; 0 = free ports")
    parser.add_argument("--seed", type=int, help="scenario seed (default: simulator.seed)")
    parser.add_argument("--truth", type=Path, help="write the ground truth (JSON Lines) here")
    parser.add_argument("--record-dir", type=Path, help="append every served page here")
    parser.add_argument("--duration", type=float, default=0.0, help="seconds; 0 = until Ctrl-C")
    parser.add_argument("--ingest-url", help="post job metadata to <url>/v1/jobs")
    parser.add_argument("--token", default="", help="bearer token for --ingest-url")
    parser.add_argument(
        "--attach-job",
        metavar="NAMESPACE/NAME",
        help="show a real process's job on host 0's last GPU, busy (the demo's CPU trainer)",
    )
    parser.add_argument(
        "--showcase",
        metavar="SCENARIO",
        help="one simulated job of this scenario holds host 0's first GPU all along, whatever "
        "the seed (the demo's: a data-loader stall, found within a minute)",
    )
    sdk = parser.add_mutually_exclusive_group()
    sdk.add_argument(
        "--sdk-socket-dir",
        type=Path,
        help="live: training processes send step metrics to the agent socket DIR/<host>.sock",
    )
    sdk.add_argument(
        "--sdk-socket",
        metavar="TEMPLATE",
        help="live: agent socket per host, with {host} and {index} (e.g. sock/agent-{index:02d}.sock)",
    )
    parser.add_argument("--generate", type=Path, metavar="OUT_DIR", help="batch mode: write here")
    parser.add_argument("--days", type=float, default=1.0, help="batch: days to generate")
    parser.add_argument("--gpus", type=int, default=128, help="batch: GPUs (8 per host)")
    parser.add_argument("--step-s", type=int, default=10, help="batch: seconds between samples")
    parser.add_argument("--start", default=DEFAULT_START, help="batch: ISO 8601 start time")
    parser.set_defaults(handler=simulate)


def _spec(args: argparse.Namespace, settings: Settings, hosts: int) -> Any:
    from simulator.fleet import FleetSpec

    if hosts < 1:
        raise ConfigError(f"--hosts must be at least 1, got {hosts}")
    return FleetSpec(
        hosts=hosts,
        seed=args.seed if args.seed is not None else settings.simulator.seed,
        cluster=settings.simulator.cluster,
        scrape_failure_rate=settings.simulator.scrape_failure_rate,
        attached_job=getattr(args, "attach_job", None) or None,
        showcase=getattr(args, "showcase", None) or None,
    )


def simulate(args: argparse.Namespace, settings: Settings) -> int:
    if args.generate is not None:
        return _generate(args, settings)
    return _serve(args, settings)


def _write_jsonl(path: Path, records: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as handle:
        for record in records:
            handle.write(json.dumps(record, sort_keys=True) + "\n")


def _serve(args: argparse.Namespace, settings: Settings) -> int:
    from simulator.hooks import JobHook
    from simulator.serve import ExporterFleet
    from simulator.sim import FleetSimulator

    hosts = args.hosts if args.hosts is not None else settings.simulator.hosts
    base_port = args.base_port if args.base_port is not None else settings.simulator.base_port
    if args.duration < 0:
        raise ConfigError(f"--duration must be >= 0, got {args.duration}")
    now = time.time()
    origin = int(now // 3600 * 3600)
    horizon = int(now - origin + (args.duration or 30 * 86_400)) + 3600
    sim = FleetSimulator(_spec(args, settings, hosts), origin_s=origin, horizon_s=horizon)
    if args.truth:
        _write_jsonl(args.truth, sim.truth_records(now, now + horizon))
    fleet = ExporterFleet(sim, time.time, base_port=base_port, record_dir=args.record_dir)
    hook = JobHook(sim, time.time, args.ingest_url, args.token) if args.ingest_url else None
    training = _training(args, sim)
    fleet.start()
    if hook:
        hook.start()
    if training:
        training.start()
    for host, url in fleet.urls().items():
        print(f"{host} {url}", flush=True)
    # SIGTERM (the demo's supervisor, systemd) stops as cleanly as Ctrl-C does.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        deadline = now + args.duration if args.duration else math.inf
        while time.time() < deadline:
            time.sleep(min(0.5, max(deadline - time.time(), 0.0)))
    except KeyboardInterrupt:
        pass
    finally:
        if training:
            training.stop()
        if hook:
            hook.stop()
        fleet.stop()
    return 0


def _training(args: argparse.Namespace, sim: Any) -> Any:
    """The simulated training processes, when an SDK socket (folder or template) is given."""
    from simulator.training import TrainingProcesses, socket_template

    if args.sdk_socket_dir is not None:
        template = str(args.sdk_socket_dir / "{host}.sock")
    elif args.sdk_socket:
        template = args.sdk_socket
    else:
        return None
    socket_for = socket_template(template)
    try:
        paths = [socket_for(host) for host in sim.hosts]
    except (KeyError, IndexError, ValueError) as exc:
        raise ConfigError(
            f"--sdk-socket {template!r}: use only {{host}} and {{index}}: {exc}"
        ) from exc
    for path in paths:
        path.parent.mkdir(parents=True, exist_ok=True)
    return TrainingProcesses(sim, time.time, socket_for)


def _generate(args: argparse.Namespace, settings: Settings) -> int:
    import pyarrow.parquet as pq

    from fleetscope.contract import TABLES
    from simulator.sim import FleetSimulator

    if args.days <= 0 or args.gpus < 1 or args.step_s < 1:
        raise ConfigError("--days must be > 0, --gpus >= 1 and --step-s >= 1")
    try:
        start = datetime.fromisoformat(args.start)
    except ValueError as exc:
        raise ConfigError(f"--start: not an ISO 8601 time: {args.start!r}") from exc
    if start.tzinfo is None:
        start = start.replace(tzinfo=UTC)
    t0 = int(start.timestamp())
    t1 = t0 + int(args.days * 86_400)
    hosts = math.ceil(args.gpus / 8)
    began = time.perf_counter()
    sim = FleetSimulator(_spec(args, settings, hosts), origin_s=t0, horizon_s=t1 - t0)
    out: Path = args.generate
    out.mkdir(parents=True, exist_ok=True)
    writers = {
        name: pq.ParquetWriter(out / f"{name}.parquet", schema, compression="zstd")
        for name, schema in TABLES.items()
    }
    rows = dict.fromkeys(TABLES, 0)
    try:
        for chunk in sim.iter_tables(t0, t1, args.step_s):
            for name, table in chunk.items():
                writers[name].write_table(table)
                rows[name] += table.num_rows
    finally:
        for writer in writers.values():
            writer.close()
    _write_jsonl(
        out / "jobs.jsonl",
        [r for r in sim.job_records() if r["end_ts"] > t0 and r["start_ts"] < t1],
    )
    _write_jsonl(out / "truth.jsonl", sim.truth_records(t0, t1))
    elapsed = time.perf_counter() - began
    summary = ", ".join(f"{name} {count:,}" for name, count in rows.items())
    print(f"wrote {out}: {summary} rows in {elapsed:.1f} s")
    return 0
