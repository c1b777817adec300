"""`make bench-quick`: each peer comparison run small; fails when a ratio falls below its floor.

    .venv/bin/python -m bench.quick [--only NAME ...]

The floors are not in this file: each is written in bench/RESULTS.md next to the figures it
guards, as a line

    Floor for `make bench-quick` (KEY): **floor 8.0x**

and read from there on every run, so raising a floor is an edit of the results, reviewed with
them. A check whose floor line is missing fails (a guard that silently guards nothing is worse
than none). Timings on a shared machine are noisy: the floors sit well below the full runs'
figures, and a failure means "re-run the full benchmark and look", not "the code is slow".
Not run by CI (timings there are noisier still); README names it.
"""

from __future__ import annotations

import argparse
import functools
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "RESULTS.md"
FLOOR_RE = re.compile(
    r"Floor for `make bench-quick` \(([^)]+)\): \*\*floor ([0-9]+(?:\.[0-9]+)?)x\*\*"
)


def read_floors(text: str) -> dict[str, float]:
    """Every `Floor for ... (KEY): **floor Nx**` line of RESULTS.md, by KEY."""
    floors: dict[str, float] = {}
    for key, value in FLOOR_RE.findall(text):
        if key in floors:
            raise SystemExit(f"bench/RESULTS.md names the floor {key!r} twice")
        floors[key] = float(value)
    return floors


@dataclass(frozen=True)
class Check:
    name: str
    key: str  # the floor's KEY in RESULTS.md
    measure: Callable[[], float]  # the ratio: peer cost / our cost (higher is better for us)


def _traces() -> float:
    from bench.trace_command import run

    rows = run(Path(os.environ.get("FLEETSCOPE_TRACE_DIR", "/work/shared/data/traces")), 3, True)
    return min(r["speedup"] for r in rows)


def _agent_scrape() -> float:
    from bench.agent_scrape import run

    return float(run(seconds=30.0, interval_s=1.0, warmup_s=10.0)["ratio"])


@functools.cache
def _ingest_run() -> dict[str, Any]:
    """One quick ingest run against Prometheus; two checks read it (agents + server, server)."""
    from bench.ingest_prometheus import quick_run

    return quick_run()


def _ingest_prometheus() -> float:
    return float(_ingest_run()["cpu_ratio"])


def _ingest_server_prometheus() -> float:
    from bench.ingest_prometheus import server_ratio

    return server_ratio(_ingest_run())


def _query_prometheus() -> float:
    from bench.query_prometheus import quick_ratio

    return quick_ratio()


def _agent_parse() -> float:
    from bench.agent import bench_parse

    return min(float(r["speedup_warm"]) for r in bench_parse(quick=True))  # type: ignore[arg-type]


CHECKS = (
    Check("traces", "whole-command speed-up over HTA, slowest trace", _traces),
    Check("agent_parse", "parser speed-up over prometheus_client, slowest page", _agent_parse),
    Check(
        "agent_scrape",
        "agent vs Prometheus scrape, Prometheus CPU per GPU-sample / ours",
        _agent_scrape,
    ),
    Check(
        "ingest_prometheus",
        "ingest vs Prometheus, Prometheus CPU per stored sample / ours",
        _ingest_prometheus,
    ),
    Check(
        "ingest_server_prometheus",
        "ingest server alone vs Prometheus, Prometheus CPU per stored sample / the server's",
        _ingest_server_prometheus,
    ),
    Check("query_prometheus", "7-day fleet numbers, PromQL seconds / ours", _query_prometheus),
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=None, help="names of checks to run")
    args = parser.parse_args(argv)
    floors = read_floors(RESULTS.read_text())
    failed: list[str] = []
    load = os.getloadavg()[0]
    print(f"load average {load:.1f} at start")
    for check in CHECKS:
        if args.only and check.name not in args.only:
            continue
        floor = floors.get(check.key)
        if floor is None:
            print(f"FAIL {check.name}: no floor line for {check.key!r} in bench/RESULTS.md")
            failed.append(check.name)
            continue
        ratio = check.measure()
        ok = ratio >= floor
        print(
            f"{'ok  ' if ok else 'FAIL'} {check.name}: {ratio:.2f}x (floor {floor:g}x, "
            f"load {os.getloadavg()[0]:.1f})",
            flush=True,
        )
        if not ok:
            failed.append(check.name)
    if failed:
        print(f"below the floor: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
