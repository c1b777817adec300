"""A real Prometheus server (Debian's `prometheus` package) as the peer of a benchmark.

Starts `/usr/bin/prometheus` on 127.0.0.1 with a scrape config of the given targets and interval,
its TSDB in a given folder, and stops it (SIGTERM, then SIGKILL) on exit. CPU and memory are read
from /proc for its process, as for ours, so both sides are measured the same way.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"
_TICKS = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process (all threads), from /proc/PID/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


@contextmanager
def prometheus(
    targets: Sequence[str], interval_s: float, data_dir: Path, extra_args: Sequence[str] = ()
) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """Prometheus scraping `targets` (host:port) every `interval_s`; yields (process, base URL)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    config = data_dir.parent / f"{data_dir.name}.yml"
    target_list = ", ".join(f"'{t}'" for t in targets)
    config.write_text(
        "global:\n"
        f"  scrape_interval: {round(interval_s * 1000)}ms\n"
        f"  scrape_timeout: {round(min(interval_s, 10.0) * 1000)}ms\n"
        "scrape_configs:\n"
        "  - job_name: dcgm\n"
        f"    static_configs:\n      - targets: [{target_list}]\n"
    )
    port = free_port()
    proc = subprocess.Popen(
        [
            PROMETHEUS,
            f"--config.file={config}",
            f"--storage.tsdb.path={data_dir}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--log.level=warn",
            *extra_args,
        ],
        stdout=subprocess.DEVNULL,
        stderr=(data_dir.parent / f"{data_dir.name}.log").open("wb"),
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"prometheus did not start (exit {proc.poll()})")
            time.sleep(0.2)
        yield proc, url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
