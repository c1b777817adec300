"""`fleetscope-agent` against Prometheus scraping the same dcgm-exporter page, same interval, same
run: CPU seconds per GPU-sample, each process's CPU read from /proc.

    .venv/bin/python -m bench.agent_scrape [--seconds 60] [--interval 1] [--quick] [--no-write]

One loopback exporter serves bench.agent's 8 GPUs x 40 fields page in dcgm-exporter's layout (fresh
values every request, keep-alive as dcgm-exporter's Go server). Two scrapers run at the same time
against it, so machine load hits both alike:

- ours: a real `collector.cli run` (what `fleetscope-agent run` starts) at `agent.interval_s`,
  psutil host metrics every `agent.host_interval_s`, 5 s batches shipped to a loopback ingest stub
  answering 202 (bench.agent's stub);
- peer: `/usr/bin/prometheus` (Debian package) with one scrape job on the same URL at the same
  interval, its TSDB in a temporary folder (so its CPU includes the append to its head block, as
  ours includes sealing and shipping).

After a warm-up, both processes' user + system CPU (/proc/PID/stat) is read over the same window;
GPU-samples are the scrapes each side made in the window (counted by the exporter per User-Agent)
times 8 GPUs; each GPU-sample is 40 field values. RSS at the end from /proc/PID/status.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

from bench.agent import _Exporter, _Ingest, _serve
from bench.prometheus_peer import cpu_s, prometheus, rss_mib
from bench.trace_command import write_section

ROOT = Path(__file__).resolve().parents[1]
SECTION = "## Agent against Prometheus's own scrape (issue 19)"
GPUS = 8
FLOOR_KEY = "agent vs Prometheus scrape, Prometheus CPU per GPU-sample / ours"
# Below the full run's 1.00x (0.80x before the agent CPU cuts), for a 30 s quick run's 10 ms CPU
# ticks (one tick is ~20 % of a side's CPU there); guards against worse.
FLOOR_X = 0.5


class _CountingExporter(_Exporter):
    """bench.agent's exporter, counting GETs per client (User-Agent's first word)."""

    counts: ClassVar[dict[str, int]] = {}
    lock: ClassVar[threading.Lock] = threading.Lock()

    def do_GET(self) -> None:
        agent = (self.headers.get("User-Agent") or "?").split("/")[0]
        with self.lock:
            self.counts[agent] = self.counts.get(agent, 0) + 1
        super().do_GET()


def _agent_env(spool: Path, exporter: str, ingest: str, interval_s: float) -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "FLEETSCOPE_AGENT_SDK_SOCKET": "",
        "FLEETSCOPE_CONFIG": "",
        "FLEETSCOPE_AGENT_DCGM_URL": exporter,
        "FLEETSCOPE_AGENT_INGEST_URL": ingest,
        "FLEETSCOPE_AGENT_INTERVAL_S": str(interval_s),
        "FLEETSCOPE_AGENT_SHIP_INTERVAL_S": "5",
        "FLEETSCOPE_AGENT_SPOOL_DIR": str(spool / "spool"),
        "FLEETSCOPE_AGENT_METRICS_PORT": "0",
        "FLEETSCOPE_CORE_LOG_LEVEL": "WARNING",
    }


def run(seconds: float, interval_s: float, warmup_s: float) -> dict[str, Any]:
    import subprocess

    exporter: ThreadingHTTPServer = _serve(_CountingExporter)
    ingest = _serve(_Ingest)
    host_port = f"127.0.0.1:{exporter.server_address[1]}"
    try:
        with tempfile.TemporaryDirectory(prefix="bench-agent-scrape-") as tmp:
            env = _agent_env(
                Path(tmp),
                f"http://{host_port}/metrics",
                f"http://127.0.0.1:{ingest.server_address[1]}",
                interval_s,
            )
            agent = subprocess.Popen([sys.executable, "-m", "collector.cli", "run"], env=env)
            try:
                with prometheus([host_port], interval_s, Path(tmp) / "prom") as (prom, _):
                    time.sleep(warmup_s)
                    load_before = os.getloadavg()[0]
                    counts0 = dict(_CountingExporter.counts)
                    a0, p0, t0 = cpu_s(agent.pid), cpu_s(prom.pid), time.monotonic()
                    time.sleep(seconds)
                    a1, p1, t1 = cpu_s(agent.pid), cpu_s(prom.pid), time.monotonic()
                    counts1 = dict(_CountingExporter.counts)
                    rss = {"ours": rss_mib(agent.pid), "prometheus": rss_mib(prom.pid)}
            finally:
                agent.terminate()
                agent.wait(timeout=30)
    finally:
        exporter.shutdown()
        ingest.shutdown()

    def scrapes(agent_name: str) -> int:
        return counts1.get(agent_name, 0) - counts0.get(agent_name, 0)

    ours_scrapes = sum(scrapes(k) for k in counts1 if k != "Prometheus")
    prom_scrapes = scrapes("Prometheus")
    out = {
        "wall_s": t1 - t0,
        "load_before": load_before,
        "load_after": os.getloadavg()[0],
        "ours_cpu_s": a1 - a0,
        "prom_cpu_s": p1 - p0,
        "ours_scrapes": ours_scrapes,
        "prom_scrapes": prom_scrapes,
        "ours_rss_mib": rss["ours"],
        "prom_rss_mib": rss["prometheus"],
    }
    out["ours_us_per_gpu_sample"] = 1e6 * out["ours_cpu_s"] / max(1, ours_scrapes * GPUS)
    out["prom_us_per_gpu_sample"] = 1e6 * out["prom_cpu_s"] / max(1, prom_scrapes * GPUS)
    out["ratio"] = out["prom_us_per_gpu_sample"] / max(1e-9, out["ours_us_per_gpu_sample"])
    return out


def render(r: dict[str, Any], command: str) -> str:
    return "\n".join(
        [
            SECTION,
            "",
            f"Command: `{command}`. One loopback exporter serving bench.agent's 8 GPUs x 40 "
            "fields page (dcgm-exporter's layout, fresh values every request); at the same time "
            "and the same interval, a real `fleetscope-agent run` process (host metrics, 5 s "
            "batches shipped to a loopback ingest stub) and `/usr/bin/prometheus` 2.42 (Debian) "
            "with one scrape job on the same URL and its TSDB on disk. CPU = user + system of each "
            "process from /proc over the same window after the warm-up; scrapes counted by the "
            "exporter per User-Agent. 1-minute load average "
            f"{r['load_before']:.1f} before, {r['load_after']:.1f} after (2-core machine shared "
            "with other engineers' jobs).",
            "",
            "| scraper | window s | scrapes | GPU-samples (x 40 values) | CPU s | CPU us per "
            "GPU-sample | RSS MiB |",
            "|---|---:|---:|---:|---:|---:|---:|",
            f"| fleetscope-agent | {r['wall_s']:.0f} | {r['ours_scrapes']} | "
            f"{r['ours_scrapes'] * GPUS} | {r['ours_cpu_s']:.2f} | "
            f"{r['ours_us_per_gpu_sample']:.0f} | {r['ours_rss_mib']:.0f} |",
            f"| Prometheus 2.42 scrape + TSDB append | {r['wall_s']:.0f} | {r['prom_scrapes']} | "
            f"{r['prom_scrapes'] * GPUS} | {r['prom_cpu_s']:.2f} | "
            f"{r['prom_us_per_gpu_sample']:.0f} | {r['prom_rss_mib']:.0f} |",
            "",
            f"Prometheus uses {r['ratio']:.2f}x our CPU per GPU-sample. Not quite like for like "
            "either way: our figure also pays psutil host metrics every 5 s and the shipping of "
            "Arrow batches (Prometheus has no host metrics here and ships nothing), Prometheus's "
            "pays its TSDB append and its own Go runtime. /proc counts CPU in 10 ms ticks: each "
            "CPU figure is +-0.01 s.",
            "",
            f"Floor for `make bench-quick` ({FLOOR_KEY}): **floor {FLOOR_X:g}x**.",
            "",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--interval", type=float, default=1.0)
    parser.add_argument("--warmup", type=float, default=15.0)
    parser.add_argument("--quick", action="store_true", help="20 s window, 10 s warm-up")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        args.seconds, args.warmup = 20.0, 10.0
    r = run(args.seconds, args.interval, args.warmup)
    command = (
        "python -m bench.agent_scrape"
        + (" --quick" if args.quick else f" --seconds {args.seconds:g}")
        + f" --interval {args.interval:g}"
    )
    text = render(r, command)
    print(text)
    if not args.no_write and not args.quick:
        write_section(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
