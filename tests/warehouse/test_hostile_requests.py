"""A real `fleetscope server` process against issue 28's hostile requests, sent as raw bytes.

Each case states the answer RFC 9112 or the ingest contract prescribes, and after each the server
must still answer /healthz: never a 5xx for a client's bytes, never a 2xx for a request whose
samples or rows cannot be stored, and memory bounded by the stated budgets.
"""

from __future__ import annotations

import json
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pyarrow as pa
import pytest

from bench.fuzz import Client, start_server
from fleetscope.contract import SCHEMA_VERSION, to_ipc
from simulator.maker.batches import gpu_batch
from simulator.wire import headers_for
from warehouse.prometheus.prompb import Series, encode_write_request

TOKEN = "hostile-test-token-0123456789abcdef"
MIB = 1024 * 1024
MAX_BODY = 16 * MIB
MAX_INFLIGHT = 32 * MIB
T0 = 1_700_000_000_000


@pytest.fixture(scope="module")
def server_process(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, str]]:
    process, url = start_server(
        tmp_path_factory.mktemp("hostile") / "data",
        TOKEN,
        FLEETSCOPE_SERVER_MAX_BODY_BYTES=str(MAX_BODY),
        FLEETSCOPE_SERVER_MAX_INFLIGHT_BYTES=str(MAX_INFLIGHT),
        FLEETSCOPE_SERVER_MAX_DECODED_BYTES=str(64 * MIB),
    )
    try:
        yield process.pid, url
    finally:
        process.terminate()
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def raw_exchange(port: int, request: bytes, *, timeout_s: float = 60.0) -> tuple[int, bytes, bool]:
    """Send raw bytes; (status, everything read, whether the server closed the connection)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as sock:
        sock.sendall(request)
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
        head, _, rest = data.partition(b"\r\n\r\n")
        length = int(next(
            (line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")),
            b"0",
        ))  # fmt: skip
        while len(rest) < length:
            chunk = sock.recv(65536)
            if not chunk:
                break
            rest += chunk
        sock.settimeout(5.0)  # the server closes right after its answer, or keeps it alive
        try:
            closed = sock.recv(1) == b""
        except (TimeoutError, ConnectionResetError):
            closed = True
        status = int(head.split(b" ", 2)[1])
        return status, head + b"\r\n\r\n" + rest, closed


def batch_request(extra: bytes, body: bytes, *, length: bytes | None = None) -> bytes:
    headers = headers_for("hostile-1", TOKEN)
    lines = [f"{k}: {v}".encode() for k, v in headers.items()]
    if length is not None:
        lines.append(b"Content-Length: " + length)
    return (
        b"POST /v1/batches/gpu_samples HTTP/1.1\r\nHost: x\r\n"
        + b"\r\n".join(lines)
        + b"\r\n"
        + extra
        + b"\r\n"
        + body
    )


def healthy(url: str) -> bool:
    client = Client(url)
    try:
        return client.send("GET", "/healthz", b"", {})[0] == 200
    finally:
        client.close()


BODY = to_ipc(gpu_batch("hostile"))
N = str(len(BODY)).encode()


@pytest.mark.parametrize(
    ("request_bytes", "status", "message"),
    [
        (batch_request(b"", BODY, length=b"1\xb2"), 400, b"Content-Length must be ASCII digits"),
        (batch_request(b"", BODY, length=b"\xb9"), 400, b"Content-Length must be ASCII digits"),
        (
            batch_request(b"Content-Length: 999\r\n", BODY, length=N),
            400,
            b"2 Content-Length headers",
        ),
        (batch_request(b"Content-Length: " + N + b"\r\n", BODY, length=N), 400, b"2 Content-Length"),
        (
            batch_request(b"Transfer-Encoding: chunked\r\n", BODY, length=N),
            400,
            b"Content-Length together with Transfer-Encoding",
        ),
        (
            batch_request(b"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n", b"0\r\n\r\n"),
            400,
            b"Transfer-Encoding",
        ),
        (
            batch_request(b"", BODY, length=N).replace(
                b"X-Fleetscope-Schema-Version: %d" % SCHEMA_VERSION,
                b"X-Fleetscope-Schema-Version: \xb9",
            ),
            400,
            b"must be an integer",
        ),
        (b"GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", 400, b"Content-Length"),
    ],
    ids=[
        "superscript two in Content-Length",
        "superscript one as Content-Length",
        "two different Content-Lengths",
        "two equal Content-Lengths",
        "Content-Length with chunked",
        "duplicate Transfer-Encoding",
        "superscript schema version",
        "GET with conflicting lengths",
    ],
)  # fmt: skip
def test_framing_that_rfc_9112_forbids_is_400_and_the_connection_closed(
    server_process: tuple[int, str], request_bytes: bytes, status: int, message: bytes
) -> None:
    pid, url = server_process
    got, answer, closed = raw_exchange(port_of(url), request_bytes)
    assert (got, closed) == (status, True), answer
    assert message in answer
    assert healthy(url) and psutil.pid_exists(pid)


def test_a_get_with_an_unread_body_closes_so_the_body_is_never_a_request(
    server_process: tuple[int, str],
) -> None:
    _, url = server_process
    smuggled = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"
    request = (
        b"GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(smuggled)
    ) + smuggled
    status, answer, closed = raw_exchange(port_of(url), request)
    assert (status, closed) == (200, True)
    assert answer.count(b"HTTP/1.1") == 1  # the body was not answered as a second request


def dictionary_bomb() -> bytes:
    """~1 KB: a one-entry dictionary of a 1 MiB string named by 300 rows (300 MiB once cast)."""
    indices = pa.array([0] * 300, pa.int32())
    host = pa.DictionaryArray.from_arrays(indices, pa.array(["a" * MIB]))
    return to_ipc(pa.table({"host": host}))


def status_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"{field} not in /proc/{pid}/status")


def test_a_dictionary_bomb_is_413_before_the_dictionary_is_expanded(
    server_process: tuple[int, str],
) -> None:
    pid, url = server_process
    client = Client(url)
    client.send("GET", "/healthz", b"", {})
    rss_before_kib = status_kib(pid, "VmRSS")
    status, answer = client.send(
        "POST", "/v1/batches/gpu_samples", dictionary_bomb(), headers_for("dict-bomb", TOKEN)
    )
    assert status == 413
    assert b"once its dictionaries are expanded (server.max_decoded_bytes)" in answer
    # The bomb expands to 300 MiB; refused from the indices, it costs the dictionary (1 MiB).
    assert (status_kib(pid, "VmHWM") - rss_before_kib) * 1024 < 64 * MIB
    client.close()


def write(url: str, body: bytes) -> tuple[int, bytes]:
    client = Client(url)
    try:
        return client.send(
            "POST",
            "/api/v1/write",
            body,
            {
                "Authorization": f"Bearer {TOKEN}",
                "Content-Type": "application/x-protobuf",
                "Content-Encoding": "snappy",
                "X-Prometheus-Remote-Write-Version": "0.1.0",
            },
        )
    finally:
        client.close()


def dcgm_series(samples: list[tuple[int, float]], gpu: str = "0") -> Series:
    labels = {"__name__": "DCGM_FI_DEV_GPU_UTIL", "gpu": gpu, "Hostname": "h1", "UUID": "GPU-0"}
    return Series(labels, samples)


def tiny_series_bomb(count: int) -> bytes:
    """A WriteRequest of `count` empty TimeSeries (two bytes each), snappy-compressed."""
    import snappy

    return bytes(snappy.compress(b"\x0a\x00" * count))


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        (
            encode_write_request([dcgm_series([(T0 + i, 1.0) for i in range(500_000)])]),
            413,
            b"has 500000 samples, over 10000 (server.remote_write_max_samples_per_series)",
        ),
        (
            tiny_series_bomb(1_100_000),
            413,
            b"more than 50000 series (server.remote_write_max_series)",
        ),
        (
            encode_write_request([dcgm_series([(2**62, 1.0)])]),
            400,
            b"outside the storable range",
        ),
        (
            encode_write_request([dcgm_series([(T0, 1.0)]), dcgm_series([(-(2**62), 1.0)], "1")]),
            400,
            b"outside the storable range",
        ),
    ],
    ids=["500k-sample series", "1.1M tiny series", "+2^62 ms", "-2^62 ms beside a good one"],
)
def test_remote_write_bombs_are_refused_naming_the_limit_before_any_2xx(
    server_process: tuple[int, str], body: bytes, status: int, message: bytes
) -> None:
    pid, url = server_process
    got, answer = write(url, body)
    assert got == status, answer
    assert message in answer
    assert healthy(url) and psutil.pid_exists(pid)


def test_an_oversized_remote_write_body_is_413_before_it_is_read(
    server_process: tuple[int, str],
) -> None:
    _, url = server_process
    head = (
        b"POST /api/v1/write HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
        b"Content-Type: application/x-protobuf\r\nContent-Encoding: snappy\r\n"
        b"Content-Length: %d\r\n\r\n" % (TOKEN.encode(), MAX_BODY + 1)
    )
    status, answer, closed = raw_exchange(port_of(url), head)
    assert (status, closed) == (413, True)
    assert b"over the limit of %d bytes" % MAX_BODY in answer


def test_bodies_in_flight_past_the_budget_get_503_with_retry_after(
    server_process: tuple[int, str],
) -> None:
    """Two connections each announce 16 MiB and send half: together they hold the 32 MiB budget,
    so a third announced body is 503 with Retry-After, its bytes unread; once they finish the
    same request is read."""
    pid, url = server_process
    port = port_of(url)
    head = batch_request(b"", b"", length=str(MAX_BODY).encode())
    holders = []
    for _ in range(2):
        sock = socket.create_connection(("127.0.0.1", port), timeout=60)
        sock.sendall(head + b"\x00" * (MAX_BODY // 2))
        holders.append(sock)
    deadline = time.monotonic() + 60
    while True:  # wait until both reservations are held (the server read their headers)
        status, answer, closed = raw_exchange(port, batch_request(b"", BODY, length=N))
        if status == 503 or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert (status, closed) == (503, True), answer
    assert b"\r\nretry-after: 1\r\n" in answer.lower() and b"server.max_inflight_bytes" in answer
    for sock in holders:
        sock.sendall(b"\x00" * (MAX_BODY - MAX_BODY // 2))
        sock.recv(65536)  # its answer: 400, garbage is not Arrow
        sock.close()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        status, answer, _ = raw_exchange(port, batch_request(b"", BODY, length=N))
        if status != 503:
            break
        time.sleep(0.1)
    assert status == 202, answer
    assert psutil.pid_exists(pid)


def test_rss_returns_near_its_baseline_after_a_burst_of_garbage_bodies(
    server_process: tuple[int, str],
) -> None:
    """Eight concurrent 16 MiB garbage bodies (valid token): at most two are held at a time
    (server.max_inflight_bytes), and afterwards RSS is back within 48 MiB of where it was."""
    pid, url = server_process
    assert healthy(url)
    baseline_kib = status_kib(pid, "VmRSS")
    answers: list[int | str] = []

    def send() -> None:
        client = Client(url)
        try:
            status, _ = client.send(
                "POST", "/v1/batches/gpu_samples", b"\x07" * MAX_BODY, headers_for("junk", TOKEN)
            )
            answers.append(status)
        except OSError:  # answered 503 and closed before the client finished sending
            answers.append("refused while sending")
        finally:
            client.close()

    threads = [threading.Thread(target=send) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert len(answers) == 8 and 400 in answers
    assert set(answers) <= {400, 503, "refused while sending"}
    deadline = time.monotonic() + 30
    while status_kib(pid, "VmRSS") - baseline_kib > 48 * 1024 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert (status_kib(pid, "VmRSS") - baseline_kib) * 1024 <= 48 * MIB
    assert json.loads(Client(url).send("GET", "/healthz", b"", {})[1])["status"] == "ok"
