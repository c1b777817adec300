"""Ingest against both peers, one fleet, one run: CPU-s per million values stored, bytes per value
after compaction, RSS, for fleetscope (agents + server), Prometheus 2.42 and VictoriaMetrics 1.79.

    .venv/bin/python -m bench.ingest_peers                       # 16 and 64 hosts, 1 s and 10 s
    .venv/bin/python -m bench.ingest_peers --hosts 16 --intervals 1 --seconds 60 --no-write

One step per (hosts, scrape interval): `hosts` loopback exporters in this process, each serving
bench.agent's 8 GPUs x 40 fields page in dcgm-exporter's layout (fresh values on every request;
bench.ingest_prometheus's fleet), scraped at the same interval at the same time by
- fleetscope: the ingest server in its own process (default settings and plug-ins, the embedded
  analyzers included) and one agent per host, as threads of `--agent-procs` processes;
- Prometheus 2.42 (`/usr/bin/prometheus`, bench.prometheus_peer), TSDB on disk;
- VictoriaMetrics 1.79 (`/usr/bin/victoria-metrics`, single node, `-promscrape.config`,
  bench.victoria_peer).

After `--warmup` s, each side's user + system CPU (/proc) is read over the same `--seconds`
window. A value = one of the page's 40 fields of one GPU at one scrape, so a scrape of a host
stores 320 values on every side (fleetscope: one gpu_samples row per GPU). Values are counted
from the exporters' requests per User-Agent over the window (ours also checked against the rows
stored). Bytes per value, after every side has stopped cleanly, over every value it stored in
the run: fleetscope, the Parquet segments after one compaction pass (`warehouse.storage.compaction`;
the whole data folder, DuckDB file, ledger and catalog included, beside it); Prometheus, its
folder (WAL and head chunks: a live server's first 2 hours hold nothing else); VictoriaMetrics,
data and indexdb after `/internal/force_merge` (bench.victoria_peer). RSS: each side's processes
at the end of the window (fleetscope: server and agent processes; the server alone beside it).

Benches are not CI: `.ci/run` installs Prometheus for tests, not VictoriaMetrics
(`apt-get install victoria-metrics`). Figures go to bench/RESULTS.md under SECTION.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.ingest_prometheus import GPUS_PER_HOST, _Fleet, agent_host, serve, stored_rows
from bench.prometheus_peer import cpu_s, dir_bytes, prometheus, rss_mib
from bench.trace_command import write_section
from bench.victoria_peer import force_merged_bytes, victoria_metrics

SECTION = "## Ingest against Prometheus and VictoriaMetrics, same fleet (issue 27)"
FIELDS = 40  # values per GPU per scrape on bench.agent's page
PROM, VM = "Prometheus", "vm_promscrape"  # User-Agent's first word of each peer


def compacted_segment_bytes(data_dir: Path) -> int | None:
    """Our Parquet segments after one compaction pass (None: no segment store there)."""
    from warehouse.storage.compaction import compact
    from warehouse.storage.segments import SegmentStore

    root = data_dir / "segments"
    if not (root / "manifest.json").exists():
        return None
    store = SegmentStore(root)
    compact(store, 128 * 2**20)
    store.purge_retired(0.0)
    manifest = store.snapshot()
    return sum(s.bytes for t in manifest.tables for s in manifest.live(t))


def step(
    hosts: int, interval_s: float, seconds: float, warmup_s: float, procs: int
) -> dict[str, Any]:
    fleet = _Fleet(hosts)
    ctx = mp.get_context("spawn")
    out: dict[str, Any] = {"hosts": hosts, "interval_s": interval_s}
    with tempfile.TemporaryDirectory(prefix="bench-ingest-peers-") as tmp:
        ours_dir, prom_dir, vm_dir = (Path(tmp) / n for n in ("fleetscope", "prom", "vm"))
        recv, send = ctx.Pipe(duplex=False)
        stop = ctx.Event()
        server = ctx.Process(target=serve, args=(str(ours_dir), send, stop, 1.0, None))
        server.start()
        url = recv.recv()
        server_pid = server.pid
        assert server_pid is not None
        targets = fleet.targets()
        agents: list[Any] = []
        try:
            for p in range(procs):
                ready = ctx.Event()
                spool = str(Path(tmp) / "spool")
                proc = ctx.Process(
                    target=agent_host, args=(targets[p::procs], url, interval_s, spool, ready, 5.0)
                )
                proc.start()
                ready.wait(120)
                agents.append(proc)
            with (
                prometheus(targets, interval_s, prom_dir) as (prom, _),
                victoria_metrics(targets, interval_s, vm_dir) as (vm, _),
            ):
                time.sleep(warmup_s)
                ours = [server_pid, *(a.pid for a in agents if a.pid is not None)]
                out["load_before"] = os.getloadavg()[0]
                c0 = dict(fleet.counts)
                s0, o0 = cpu_s(server_pid), sum(cpu_s(p) for p in ours)
                p0, v0, t0 = cpu_s(prom.pid), cpu_s(vm.pid), time.monotonic()
                time.sleep(seconds)
                s1, o1 = cpu_s(server_pid), sum(cpu_s(p) for p in ours)
                p1, v1, t1 = cpu_s(prom.pid), cpu_s(vm.pid), time.monotonic()
                c1 = dict(fleet.counts)
                out["load_after"] = os.getloadavg()[0]
                out["rss"] = {
                    "ours": sum(rss_mib(p) for p in ours),
                    "server": rss_mib(server_pid),
                    "prometheus": rss_mib(prom.pid),
                    "victoria": rss_mib(vm.pid),
                }
        finally:
            for a in agents:
                a.terminate()
            for a in agents:
                a.join(60)
            stop.set()
            server.join(120)
            fleet.stop()
        out["wall_s"] = t1 - t0
        out["cpu_s"] = {
            "ours": o1 - o0,
            "server": s1 - s0,
            "prometheus": p1 - p0,
            "victoria": v1 - v0,
        }
        window = {k: c1.get(k, 0) - c0.get(k, 0) for k in c1}
        total = dict(fleet.counts)
        per_scrape = GPUS_PER_HOST * FIELDS

        def ours_of(counts: dict[str, int]) -> int:
            return per_scrape * sum(v for k, v in counts.items() if k not in (PROM, VM))

        out["values"] = {
            "ours": ours_of(window),
            "prometheus": per_scrape * window.get(PROM, 0),
            "victoria": per_scrape * window.get(VM, 0),
        }
        out["values_total"] = {
            "ours": ours_of(total),
            "prometheus": per_scrape * total.get(PROM, 0),
            "victoria": per_scrape * total.get(VM, 0),
        }
        out["user_agents"] = sorted(total)
        out["ours_rows"] = stored_rows(str(ours_dir))
        out["bytes"] = {
            "ours_folder": dir_bytes(ours_dir),
            "ours": compacted_segment_bytes(ours_dir),
            "prometheus": dir_bytes(prom_dir),
            "victoria": force_merged_bytes(vm_dir),
        }
    return out


def per_million(r: dict[str, Any], side: str) -> float:
    return 1e6 * float(r["cpu_s"][side]) / max(1, int(r["values"][side]))


def per_value(r: dict[str, Any], side: str) -> float | None:
    stored = r["bytes"][side]
    if stored is None:
        return None
    # ours: the rows it stored (an agent's last unshipped batch is not stored); peers: scraped
    values = (
        FIELDS * int(r["ours_rows"])
        if side in ("ours", "ours_folder")
        else int(r["values_total"][side])
    )
    return float(stored) / max(1, int(values))


def render(rows: list[dict[str, Any]], command: str) -> str:
    lines = [
        SECTION,
        "",
        f"Command: `{command}`. What is measured and how: bench/ingest_peers.py's docstring. "
        "Load: the 1-minute load average before / after the window (2-core machine, shared).",
        "",
        "| hosts | scrape | side | CPU-s per million values | values in window | bytes per "
        "value | RSS MiB | load |",
        "|---:|---:|---|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        load = f"{r['load_before']:.1f} / {r['load_after']:.1f}"
        head = f"| {r['hosts']} | {r['interval_s']:g} s"
        ours_b, folder_b = per_value(r, "ours"), per_value(r, "ours_folder")
        ours_bytes = (
            f"{ours_b:.2f} segments compacted ({folder_b:.1f} whole folder)"
            if ours_b is not None
            else f"{folder_b:.1f} whole folder"
        )
        lines += [
            f"{head} | fleetscope agents + server | {per_million(r, 'ours'):.1f} (server "
            f"{1e6 * r['cpu_s']['server'] / max(1, r['values']['ours']):.1f}) | "
            f"{r['values']['ours']:,} | {ours_bytes} | {r['rss']['ours']:.0f} (server "
            f"{r['rss']['server']:.0f}) | {load} |",
            f"{head} | Prometheus 2.42 | {per_million(r, 'prometheus'):.1f} | "
            f"{r['values']['prometheus']:,} | {per_value(r, 'prometheus'):.2f} (live head: WAL + "
            f"head chunks) | {r['rss']['prometheus']:.0f} | {load} |",
            f"{head} | VictoriaMetrics 1.79 | {per_million(r, 'victoria'):.1f} | "
            f"{r['values']['victoria']:,} | {per_value(r, 'victoria'):.2f} (after force-merge) | "
            f"{r['rss']['victoria']:.0f} | {load} |",
        ]
    return "\n".join([*lines, ""])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, nargs="+", default=[16, 64])
    parser.add_argument("--intervals", type=float, nargs="+", default=[1.0, 10.0])
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--warmup", type=float, default=20.0)
    parser.add_argument("--agent-procs", type=int, default=2)
    parser.add_argument("--no-write", action="store_true", help="print, leave RESULTS.md alone")
    args = parser.parse_args(argv)
    rows = []
    for hosts in args.hosts:
        for interval in args.intervals:
            r = step(hosts, interval, args.seconds, args.warmup, args.agent_procs)
            print(r, flush=True)
            rows.append(r)
    command = (
        f"python -m bench.ingest_peers --hosts {' '.join(map(str, args.hosts))} --intervals "
        f"{' '.join(f'{i:g}' for i in args.intervals)} --seconds {args.seconds:g} --warmup "
        f"{args.warmup:g} --agent-procs {args.agent_procs}"
    )
    text = render(rows, command)
    print(text)
    if not args.no_write:
        write_section(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
