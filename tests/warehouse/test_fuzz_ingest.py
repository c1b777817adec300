"""A real `fleetscope server` process under hostile bodies: mutation fuzzing and a decompression bomb.

The server runs as its own process so that a crash in native code (issue 12: libparquet, after
~700 cases) shows up as a dead process, and its memory is measured from /proc, not guessed.
The long run is `make fuzz` (bench/fuzz.py); this is the bounded one.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from bench import fuzz_hostile as hostile
from bench.fuzz import Client, run, start_server
from fleetscope.contract import to_ipc
from simulator.maker.batches import gpu_batch
from simulator.wire import headers_for

TOKEN = "fuzz-test-token-0123456789abcdef"
DATA = Path(__file__).resolve().parents[1] / "data" / "ingest"
MIB = 1024 * 1024


@pytest.fixture(scope="module")
def server_process(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, str]]:
    process, url = start_server(tmp_path_factory.mktemp("fuzz") / "data", TOKEN)
    try:
        yield process.pid, url
    finally:
        process.terminate()
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def status_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"{field} not in /proc/{pid}/status")


def test_mutated_bodies_get_4xx_and_the_server_keeps_every_earlier_row(
    server_process: tuple[int, str],
) -> None:
    pid, url = server_process
    client = Client(url)
    body = to_ipc(gpu_batch("before"))
    status, answer = client.send(
        "POST", "/v1/batches/gpu_samples", body, headers_for("before-1", TOKEN)
    )
    assert (status, answer) == (202, b'{"batch_id": "before-1", "rows": 80, "duplicate": false}')
    report = run(url, TOKEN, cases=240, seed=12, alive=lambda: psutil.pid_exists(pid))
    assert report.failures == []  # no 5xx, no dropped connection, the process alive
    assert sum(report.statuses.values()) == 240
    assert psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    status, answer = client.send(
        "POST", "/v1/batches/gpu_samples", body, headers_for("before-1", TOKEN)
    )
    assert (status, answer) == (202, b'{"batch_id": "before-1", "rows": 80, "duplicate": true}')
    assert client.send("GET", "/healthz", b"", {})[0] == 200
    client.close()


def test_a_decompression_bomb_is_refused_without_the_memory(
    server_process: tuple[int, str],
) -> None:
    """121 KB that decode to 2.0 GB: 413 before decoding, and the server's peak RSS barely moves."""
    pid, url = server_process
    bomb = (DATA / "bomb-2gb.arrows").read_bytes()
    client = Client(url)
    client.send("GET", "/healthz", b"", {})
    rss_before_kib = status_kib(pid, "VmRSS")
    for attempt in range(3):
        status, answer = client.send(
            "POST", "/v1/batches/gpu_samples", bomb, headers_for(f"bomb-{attempt}", TOKEN)
        )
        assert status == 413
        assert b"decodes to more than 268435456 bytes (server.max_decoded_bytes)" in answer
    peak_kib = status_kib(pid, "VmHWM")
    assert (peak_kib - rss_before_kib) * 1024 < 64 * MIB  # was +1,988 MiB, and it stayed
    client.close()


def test_hostile_kinds_get_4xx_and_the_server_lives(server_process: tuple[int, str]) -> None:
    """Issue 28's kinds (dictionary, series and sample bombs, header bytes, framing conflicts),
    two rounds: never a 5xx or a dropped connection (a bomb under the limits may be a 204)."""
    pid, url = server_process
    port = int(url.rsplit(":", 1)[1])
    report = hostile.run(port, TOKEN, cases=10, seed=28, alive=lambda: psutil.pid_exists(pid))
    assert report.failures == []
    assert sum(report.statuses.values()) == 10
    assert all(200 <= int(k.rsplit(" ", 1)[1]) < 500 for k in report.statuses), report.statuses
    assert sum(n for k, n in report.statuses.items() if k.startswith("framing")) == 2
