"""A real VictoriaMetrics single node (Debian's `victoria-metrics` 1.79) as a benchmark's peer.

Starts `/usr/bin/victoria-metrics` on 127.0.0.1 with `-promscrape.config` scraping the given
targets at the given interval, its storage in a given folder, and stops it (SIGINT: it flushes its
in-memory parts to disk, then SIGKILL past 60 s). `force_merged_bytes` restarts it on the same
folder without scraping, asks `/internal/force_merge` for every partition, waits until no merge is
active, stops it and counts the storage (data and indexdb; its caches left out): the bytes its
published "after force-merge" figure refers to. CPU and memory are read from /proc as for the
other sides (bench.prometheus_peer).

Benches only: `.ci/run` does not install it (`apt-get install victoria-metrics`).
"""

from __future__ import annotations

import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from bench.prometheus_peer import dir_bytes, free_port

VICTORIA = shutil.which("victoria-metrics") or "/usr/bin/victoria-metrics"
STORAGE_DIRS = ("data", "indexdb")


def _get(url: str, timeout: float = 5.0) -> str:
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return str(r.read().decode())


@contextmanager
def victoria_metrics(
    targets: Sequence[str], interval_s: float | None, data_dir: Path
) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """VictoriaMetrics scraping `targets` every `interval_s` (None: no scraping); yields
    (process, base URL)."""
    if not Path(VICTORIA).exists():
        raise SystemExit(f"{VICTORIA} not found: apt-get install victoria-metrics (benches only)")
    data_dir.mkdir(parents=True, exist_ok=True)
    args = [
        VICTORIA,
        f"-storageDataPath={data_dir}",
        "-loggerLevel=WARN",
        "-retentionPeriod=100y",  # the bench's data are "now": nothing ages out during a run
    ]
    if interval_s is not None:
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
        args.append(f"-promscrape.config={config}")
    port = free_port()
    args.append(f"-httpListenAddr=127.0.0.1:{port}")
    log = (data_dir.parent / f"{data_dir.name}.log").open("ab")
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=log)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if _get(f"{url}/health", 2).strip() == "OK":
                    break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"victoria-metrics did not start (exit {proc.poll()})")
            time.sleep(0.2)
        yield proc, url
    finally:
        proc.send_signal(2)  # SIGINT: graceful, flushes the in-memory parts
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def active_merges(url: str) -> float:
    """Merges running now, from its own /metrics: vm_active_merges summed over types, plus
    vm_active_force_merges (the force-merge endpoint answers at once and merges behind)."""
    total = 0.0
    for line in _get(f"{url}/metrics").splitlines():
        if line.startswith(("vm_active_merges", "vm_active_force_merges")):
            total += float(line.rsplit(" ", 1)[1])
    return total


def storage_bytes(data_dir: Path) -> int:
    return sum(dir_bytes(data_dir / d) for d in STORAGE_DIRS if (data_dir / d).exists())


def force_merged_bytes(data_dir: Path, timeout_s: float = 300.0) -> int:
    """The storage's bytes after a force-merge of every partition (module docstring)."""
    with victoria_metrics((), None, data_dir) as (_, url):
        month = datetime.now(UTC).strftime("%Y_%m")
        _get(f"{url}/internal/force_merge?partition_prefix={month}", timeout_s)
        deadline = time.monotonic() + timeout_s
        quiet = 0
        while quiet < 3 and time.monotonic() < deadline:  # three idle polls in a row
            quiet = quiet + 1 if active_merges(url) == 0 else 0
            time.sleep(1.0)
    return storage_bytes(data_dir)
