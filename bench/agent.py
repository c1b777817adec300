"""Agent benchmark: parse speed against prometheus_client.parser, and agent CPU at 1 Hz.

    .venv/bin/python -m bench.agent            # 120 s agent run
    .venv/bin/python -m bench.agent --quick    # 20 s agent run, fewer parse repetitions

1. Parse: the same pages (the four shared dcgm-exporter variants and a generated 8 GPUs x 40
   fields page in dcgm-exporter's format) through prometheus_client.parser and through
   fleetscope.exposition, checking the samples are identical (after prometheus_client's documented
   `_total` renaming of counters). "cold" uses a fresh parser per page (no label cache carried),
   "warm" reuses one parser as the agent does every second.
2. CPU: a real `fleetscope-agent run` process at agent.interval_s = 1 scrapes a real HTTP exporter
   serving the 8 x 40 page (a fresh page every scrape: values change), adds psutil host metrics
   (every agent.host_interval_s, default 5 s), batches every 5 s and ships to a real loopback
   ingest answering 202 (and the profiling relay's polls with no requests, as ingest does). Its
   CPU time (user + sys, all threads, from psutil) is measured after a 15 s warm-up and scaled to
   CPU seconds per hour. `--before REF` first runs the agent of an older commit the same way
   (its packages extracted with `git archive`), so before and after share one run and machine.

Target (docs: design.md figures): < 0.2 % of one core (7.2 CPU s per hour), parse >= 10x faster.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import psutil
from prometheus_client.parser import text_string_to_metric_families

from collector.dcgm_scan import DcgmScanner
from fleetscope.exposition import ExpositionParser, parse
from fleetscope.normalize import GpuReading, normalize_samples

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT / "tests" / "data" / "dcgm"

# 40 fields as dcgm-exporter names them (types and help as in its CSVs).
FIELDS_40 = [
    ("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz)."),
    ("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz)."),
    ("DCGM_FI_DEV_MEMORY_TEMP", "gauge", "Memory temperature (in C)."),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C)."),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W)."),
    (
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
        "counter",
        "Total energy consumption since boot (in mJ).",
    ),
    (
        "DCGM_FI_DEV_PCIE_TX_THROUGHPUT",
        "counter",
        "Total number of bytes transmitted through PCIe TX (in KB) via NVML.",
    ),
    (
        "DCGM_FI_DEV_PCIE_RX_THROUGHPUT",
        "counter",
        "Total number of bytes received through PCIe RX (in KB) via NVML.",
    ),
    ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "Total number of PCIe retries."),
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %)."),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %)."),
    ("DCGM_FI_DEV_ENC_UTIL", "gauge", "Encoder utilization (in %)."),
    ("DCGM_FI_DEV_DEC_UTIL", "gauge", "Decoder utilization (in %)."),
    ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered."),
    (
        "DCGM_FI_DEV_POWER_VIOLATION",
        "counter",
        "Throttling duration due to power constraints (in us).",
    ),
    (
        "DCGM_FI_DEV_THERMAL_VIOLATION",
        "counter",
        "Throttling duration due to thermal constraints (in us).",
    ),
    (
        "DCGM_FI_DEV_SYNC_BOOST_VIOLATION",
        "counter",
        "Throttling duration due to sync-boost constraints (in us).",
    ),
    (
        "DCGM_FI_DEV_BOARD_LIMIT_VIOLATION",
        "counter",
        "Throttling duration due to board limit constraints (in us).",
    ),
    (
        "DCGM_FI_DEV_LOW_UTIL_VIOLATION",
        "counter",
        "Throttling duration due to low utilization (in us).",
    ),
    (
        "DCGM_FI_DEV_RELIABILITY_VIOLATION",
        "counter",
        "Throttling duration due to reliability constraints (in us).",
    ),
    ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB)."),
    ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB)."),
    ("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "counter", "Total number of single-bit volatile ECC errors."),
    ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter", "Total number of double-bit volatile ECC errors."),
    (
        "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
        "counter",
        "Total number of NVLink bandwidth counters for all lanes.",
    ),
    (
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
        "counter",
        "Number of remapped rows for uncorrectable errors.",
    ),
    (
        "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
        "counter",
        "Number of remapped rows for correctable errors.",
    ),
    ("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "Whether remapping of rows has failed."),
    ("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "gauge", "Current clock throttle reasons."),
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", "Ratio of time the graphics engine is active."),
    ("DCGM_FI_PROF_SM_ACTIVE", "gauge", "The ratio of cycles an SM has at least 1 warp assigned."),
    ("DCGM_FI_PROF_SM_OCCUPANCY", "gauge", "The ratio of number of warps resident on an SM."),
    (
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
        "gauge",
        "Ratio of cycles the tensor (HMMA) pipe is active.",
    ),
    (
        "DCGM_FI_PROF_DRAM_ACTIVE",
        "gauge",
        "Ratio of cycles the device memory interface is active sending or receiving data.",
    ),
    ("DCGM_FI_PROF_PIPE_FP64_ACTIVE", "gauge", "Ratio of cycles the fp64 pipes are active."),
    ("DCGM_FI_PROF_PIPE_FP32_ACTIVE", "gauge", "Ratio of cycles the fp32 pipes are active."),
    ("DCGM_FI_PROF_PIPE_FP16_ACTIVE", "gauge", "Ratio of cycles the fp16 pipes are active."),
    (
        "DCGM_FI_PROF_PCIE_TX_BYTES",
        "gauge",
        "The rate of data transmitted over the PCIe bus (in bytes per second).",
    ),
    (
        "DCGM_FI_PROF_PCIE_RX_BYTES",
        "gauge",
        "The rate of data received over the PCIe bus (in bytes per second).",
    ),
    (
        "DCGM_FI_PROF_NVLINK_TX_BYTES",
        "gauge",
        "The rate of data transmitted over NVLink (in bytes per second).",
    ),
]
assert len(FIELDS_40) == 40


def page_8x40(rng: random.Random) -> str:
    """An 8-GPU page in dcgm-exporter's layout (HELP/TYPE per field, %f floats)."""
    lines: list[str] = []
    for name, kind, help_text in FIELDS_40:
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
        for gpu in range(8):
            labels = (
                f'gpu="{gpu}",UUID="GPU-5f1c2a7e-8b3d-4c11-9e2a-00000000000{gpu}",'
                f'pci_bus_id="00000000:{0x18 + gpu:02X}:00.0",device="nvidia{gpu}",'
                f'modelName="NVIDIA H100 80GB HBM3",Hostname="dgx-b7",'
                f'DCGM_FI_DRIVER_VERSION="570.133.20",hpc_job="{918273 + gpu // 4}"'
            )
            value = f"{rng.random():f}" if "PROF" in name else str(rng.randrange(0, 100000))
            lines.append(f"DCGM_FI{name[7:]}{{{labels}}} {value}")
    return "\n".join(lines) + "\n"


def _reference(text: str) -> list[tuple[object, ...]]:
    return [
        (s.name, s.labels, s.value, s.timestamp)
        for f in text_string_to_metric_families(text)
        for s in f.samples
    ]


def _ours(text: str) -> list[tuple[object, ...]]:
    page = parse(text)
    return [
        (s.name + "_total" if page.types.get(s.name) == "counter" and not s.name.endswith("_total") else s.name,
         s.labels, s.value, s.timestamp)
        for s in page.samples
    ]  # fmt: skip


def _best_of(fn, text: str, repeat: int) -> float:  # type: ignore[no-untyped-def]
    """Best of 5 runs, in CPU time of this thread (other processes' load does not count)."""
    best = float("inf")
    for _ in range(5):
        start = time.thread_time()
        for _ in range(repeat):
            fn(text)
        best = min(best, (time.thread_time() - start) / repeat)
    return best


def bench_parse(quick: bool) -> list[dict[str, object]]:
    pages = {p.stem: p.read_text() for p in sorted(SHARED.glob("*.prom"))}
    pages["generated_8gpu_x_40"] = page_8x40(random.Random(1))
    repeat = 20 if quick else 100
    results = []
    for name, text in pages.items():
        identical = _ours(text) == _reference(text)
        ref = _best_of(lambda t: list(text_string_to_metric_families(t)), text, repeat)
        cold = _best_of(lambda t: ExpositionParser().parse(t), text, repeat)
        warm_parser = ExpositionParser()
        warm = _best_of(warm_parser.parse, text, repeat)
        results.append({
            "page": name, "samples": len(parse(text).samples), "identical": identical,
            "prometheus_client_ms": ref * 1e3, "ours_cold_ms": cold * 1e3, "ours_warm_ms": warm * 1e3,
            "speedup_cold": ref / cold, "speedup_warm": ref / warm,
        })  # fmt: skip
    return results


def bench_scan(quick: bool) -> dict[str, object]:
    """Page text -> gpu_samples readings, as the agent does every second: 50 different 8 x 40
    pages (values change, series stay), each through the full parser + normalize.py and through
    one reused DcgmScanner; readings must be identical."""
    rng = random.Random(3)
    texts = [page_8x40(rng) for _ in range(50)]

    def full(text: str) -> list[GpuReading]:
        return normalize_samples(parse(text).samples, ts_ms=0, cluster="c")

    scanner = DcgmScanner()

    def scanned(text: str) -> list[GpuReading]:
        return scanner.scan(text, ts_ms=0, cluster="c")

    def exact(readings: list[GpuReading]) -> str:
        return repr([(r.row, r.labels, r.extra) for r in readings])

    identical = all(exact(scanned(t)) == exact(full(t)) for t in texts)
    repeat = 2 if quick else 10

    def per_page(fn) -> float:  # type: ignore[no-untyped-def]
        best = float("inf")
        for _ in range(5):
            start = time.thread_time()
            for _ in range(repeat):
                for text in texts:
                    fn(text)
            best = min(best, (time.thread_time() - start) / (repeat * len(texts)))
        return best * 1e3

    full_ms, scan_ms = per_page(full), per_page(scanned)
    return {"identical": identical, "parse_normalize_ms": full_ms, "scanner_ms": scan_ms,
            "speedup": full_ms / scan_ms}  # fmt: skip


class _Exporter(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as dcgm-exporter's Go server does
    rng = random.Random(2)

    def do_GET(self) -> None:
        body = page_8x40(self.rng).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


class _Ingest(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if self.path == "/v1/agent/poll":  # the profiling relay's poll, answered as ingest does
            body, status = b'{"requests": [], "max_trace_bytes": 67108864}', 200
        else:
            body, status = b'{"rows": 0, "duplicate": false}', 202
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


def _serve(handler: type[BaseHTTPRequestHandler]) -> ThreadingHTTPServer:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def checkout(ref: str, into: Path) -> Path:
    """The `collector` and `fleetscope` packages of git `ref`, extracted under `into` (read-only
    git: `git archive`), so an older agent runs beside this one in the same benchmark run."""
    archive = subprocess.run(
        ["git", "archive", ref, "collector", "fleetscope"], cwd=ROOT, check=True,
        capture_output=True,
    ).stdout  # fmt: skip
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def bench_cpu(seconds: float, tree: Path = ROOT) -> dict[str, object]:
    """CPU of a `collector.cli run` process importing its code from `tree`."""
    exporter, ingest = _serve(_Exporter), _serve(_Ingest)
    with tempfile.TemporaryDirectory() as spool:
        env = {
            **os.environ,
            "PYTHONPATH": str(tree),
            # an SDK socket in the temp dir, unless the caller set one ('' turns the SDK off)
            "FLEETSCOPE_AGENT_SDK_SOCKET": os.environ.get(
                "FLEETSCOPE_AGENT_SDK_SOCKET", str(Path(spool) / "sdk" / "agent.sock")
            ),
            "FLEETSCOPE_CONFIG": "",
            "FLEETSCOPE_AGENT_DCGM_URL": f"http://127.0.0.1:{exporter.server_address[1]}/metrics",
            "FLEETSCOPE_AGENT_INGEST_URL": f"http://127.0.0.1:{ingest.server_address[1]}",
            "FLEETSCOPE_AGENT_INTERVAL_S": "1",
            "FLEETSCOPE_AGENT_SHIP_INTERVAL_S": "5",
            "FLEETSCOPE_AGENT_SPOOL_DIR": str(Path(spool) / "spool"),
            "FLEETSCOPE_AGENT_METRICS_PORT": "0",
            "FLEETSCOPE_CORE_LOG_LEVEL": "WARNING",
        }
        proc = subprocess.Popen([sys.executable, "-m", "collector.cli", "run"], env=env, cwd=tree)
        try:
            ps = psutil.Process(proc.pid)
            time.sleep(15.0)  # start-up (imports, first seal, first /proc scan) is not steady state
            load_before = os.getloadavg()[0]
            c0, t0 = ps.cpu_times(), time.monotonic()
            time.sleep(seconds)
            c1, t1 = ps.cpu_times(), time.monotonic()
            rss_mib = ps.memory_info().rss / 2**20
            threads = ps.num_threads()
        finally:
            proc.terminate()
            proc.wait(timeout=30)
            exporter.shutdown()
            ingest.shutdown()
    cpu_s = (c1.user - c0.user) + (c1.system - c0.system)
    wall_s = t1 - t0
    return {
        "wall_s": round(wall_s, 1), "cpu_s": round(cpu_s, 3),
        "cpu_s_per_hour": round(cpu_s / wall_s * 3600, 2),
        "pct_of_one_core": round(100 * cpu_s / wall_s, 3), "rss_mib": round(rss_mib, 1),
        "threads": threads, "load1_before": load_before, "load1_after": os.getloadavg()[0],
    }  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="short run")
    parser.add_argument("--seconds", type=float, default=None, help="agent run length")
    parser.add_argument(
        "--before", default="3951dd3",
        help="git ref of an older agent to measure in the same run ('' to skip); default: the "
        "collector's first commit, where 0.34 %% of a core was measured",
    )  # fmt: skip
    args = parser.parse_args(argv)
    parse_results = bench_parse(args.quick)
    print(
        f"{'page':<22}{'samples':>8}{'same':>6}{'prom_client ms':>16}{'cold ms':>9}{'warm ms':>9}{'x cold':>8}{'x warm':>8}"
    )
    for r in parse_results:
        print(f"{r['page']:<22}{r['samples']:>8}{r['identical']!s:>6}{r['prometheus_client_ms']:>16.3f}"
              f"{r['ours_cold_ms']:>9.3f}{r['ours_warm_ms']:>9.3f}{r['speedup_cold']:>8.1f}{r['speedup_warm']:>8.1f}")  # fmt: skip
    scan = bench_scan(args.quick)
    print(
        "page -> readings, 8 x 40, fresh values: parse + normalize "
        f"{scan['parse_normalize_ms']:.3f} ms, DcgmScanner {scan['scanner_ms']:.3f} ms "
        f"({scan['speedup']:.1f}x), identical: {scan['identical']}"
    )
    seconds = args.seconds or (20.0 if args.quick else 120.0)
    if args.before:
        with tempfile.TemporaryDirectory() as old:
            before = bench_cpu(seconds, checkout(args.before, Path(old)))
        print(f"agent at 1 Hz, 8 GPUs x 40 fields, {args.before}:", json.dumps(before))
    cpu = bench_cpu(seconds)
    print("agent at 1 Hz, 8 GPUs x 40 fields, this tree:", json.dumps(cpu))
    ok = all(r["identical"] for r in parse_results) and bool(scan["identical"])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
