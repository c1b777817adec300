"""Issue 28's hostile kinds for the mutation fuzz: dictionary bombs, remote_write series and sample
bombs, odd header bytes and framing conflicts, each sent as raw bytes on its own connection.

    tests/warehouse/test_fuzz_ingest.py    # the bounded run in make test
    .venv/bin/python -m bench.fuzz         # the long run (make fuzz) runs these after the bodies

A case fails when the answer is a 5xx, no answer comes within 60 s, or the server process dies.
Every kind is generated from the seed (sizes, counts and the bytes chosen at random), so a
failure replays with the same --seed.
"""

from __future__ import annotations

import contextlib
import random
import socket
from collections.abc import Callable

import pyarrow as pa
import snappy

from bench.fuzz import Report
from fleetscope.contract import ARROW_STREAM_MEDIA_TYPE, to_ipc
from warehouse.prometheus.prompb import Series, encode_write_request

Case = Callable[[random.Random, str], bytes]  # (rng, token) -> the raw request
T0 = 1_700_000_000_000


def _request(path: str, headers: dict[str, bytes], body: bytes, extra: bytes = b"") -> bytes:
    lines = b"".join(k.encode() + b": " + v + b"\r\n" for k, v in headers.items())
    return (
        b"POST " + path.encode() + b" HTTP/1.1\r\nHost: fuzz\r\n" + lines + extra + b"\r\n" + body
    )


def _batch_headers(rng: random.Random, token: str, length: int) -> dict[str, bytes]:
    return {
        "Authorization": f"Bearer {token}".encode(),
        "Content-Type": ARROW_STREAM_MEDIA_TYPE.encode(),
        "X-Fleetscope-Schema-Version": b"1",
        "X-Fleetscope-Batch-Id": f"hostile-{rng.getrandbits(40):x}".encode(),
        "Content-Length": str(length).encode(),
    }


def _write_headers(token: str, length: int) -> dict[str, bytes]:
    return {
        "Authorization": f"Bearer {token}".encode(),
        "Content-Type": b"application/x-protobuf",
        "Content-Encoding": b"snappy",
        "Content-Length": str(length).encode(),
    }


def dictionary_bomb(rng: random.Random, token: str) -> bytes:
    """One dictionary entry of up to 4 MiB named by up to 100,000 rows (up to 400 GB expanded)."""
    entry = "x" * rng.choice((1, 1024, 1 << 20, 4 << 20))
    rows = rng.choice((1, 300, 10_000, 100_000))
    column = rng.choice(("host", "job_id", "uuid"))
    indices = pa.array([0] * rows, pa.int32())
    body = to_ipc(pa.table({column: pa.DictionaryArray.from_arrays(indices, pa.array([entry]))}))
    return _request("/v1/batches/gpu_samples", _batch_headers(rng, token, len(body)), body)


def series_bomb(rng: random.Random, token: str) -> bytes:
    """Up to 2 M empty TimeSeries (two bytes each), or one label-heavy series."""
    if rng.random() < 0.5:
        body = bytes(snappy.compress(b"\x0a\x00" * rng.choice((10, 60_000, 2_000_000))))
    else:
        labels = {f"l{i}": "v" * rng.choice((1, 1000)) for i in range(rng.choice((5, 500)))}
        body = encode_write_request([Series({"__name__": "DCGM_FI_DEV_GPU_UTIL", **labels}, [])])
    return _request("/api/v1/write", _write_headers(token, len(body)), body)


def sample_bomb(rng: random.Random, token: str) -> bytes:
    """A DCGM series of up to 500,000 samples, with timestamps near or past the storable range."""
    count = rng.choice((1, 1000, 20_000, 500_000))
    base = rng.choice((T0, 2**62, -(2**62), 253_402_300_799_999))
    samples = [(base + i, float(i)) for i in range(count)]
    labels = {"__name__": "DCGM_FI_DEV_GPU_UTIL", "gpu": "0", "Hostname": "fuzz-h"}
    body = encode_write_request([Series(labels, samples)])
    return _request("/api/v1/write", _write_headers(token, len(body)), body)


def header_bytes(rng: random.Random, token: str) -> bytes:
    """A valid small batch whose length, schema version or batch id carries odd bytes."""
    body = b"\xff" * 16
    headers = _batch_headers(rng, token, len(body))
    name = rng.choice(("Content-Length", "X-Fleetscope-Schema-Version", "X-Fleetscope-Batch-Id"))
    odd = bytes(rng.choice((0xB2, 0xB9, 0xBC, 0x80, 0xFF, 0x30, 0x31, 0x2D, 0x2B, 0x20)) for _ in
                range(rng.randint(1, 6)))  # fmt: skip
    headers[name] = odd
    return _request("/v1/batches/gpu_samples", headers, body)


def framing_conflict(rng: random.Random, token: str) -> bytes:
    """Two Content-Lengths, Content-Length with chunked, or repeated Transfer-Encoding."""
    body = b"\xff" * 16
    headers = _batch_headers(rng, token, len(body))
    extra = rng.choice((
        b"Content-Length: %d\r\n" % rng.choice((0, 15, 16, 17, 1 << 30)),
        b"Transfer-Encoding: chunked\r\n",
        b"Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n",
        b"Content-Length: 16\r\nTransfer-Encoding: identity\r\n",
    ))  # fmt: skip
    return _request("/v1/batches/gpu_samples", headers, body, extra)


KINDS: dict[str, Case] = {
    "dictionary bomb": dictionary_bomb,
    "series bomb": series_bomb,
    "sample bomb": sample_bomb,
    "header bytes": header_bytes,
    "framing conflict": framing_conflict,
}


def send_raw(port: int, request: bytes) -> int:
    """Send one raw request on a new connection; the answer's status, -1 when none came."""
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        with contextlib.suppress(OSError):  # refused before the body was read: answer readable
            sock.sendall(request)
        data = b""
        try:
            while b"\r\n" not in data:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                data += chunk
        except OSError:
            return -1
    parts = data.split(b" ", 2)
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else -1


def run(port: int, token: str, *, cases: int, seed: int, alive: Callable[[], bool]) -> Report:
    """`cases` hostile requests round-robin over KINDS; the report of what came back."""
    rng = random.Random(seed)
    report = Report()
    names = list(KINDS)
    for case in range(cases):
        name = names[case % len(names)]
        status = send_raw(port, KINDS[name](rng, token))
        report.statuses[f"{name} {status}"] += 1
        if status >= 500 or status < 0 or not alive():
            report.failures.append(f"case {case} {name} -> {status}")
            if not alive():
                break
    return report


def issue_cases(token: str) -> dict[str, bytes]:
    """The issue's exact hostile requests, for timing their answers (`main`)."""
    labels = {"__name__": "DCGM_FI_DEV_GPU_UTIL", "gpu": "0", "Hostname": "fuzz-h"}
    big = encode_write_request([Series(labels, [(T0 + i, 1.0) for i in range(500_000)])])
    tiny = bytes(snappy.compress(b"\x0a\x00" * 1_100_000))
    far = encode_write_request([Series(labels, [(2**62, 1.0)])])
    indices = pa.array([0] * 300, pa.int32())
    bomb = to_ipc(
        pa.table({"host": pa.DictionaryArray.from_arrays(indices, pa.array(["x" * (1 << 20)]))})
    )
    rng = random.Random(0)
    return {
        "500,000-sample series": _request("/api/v1/write", _write_headers(token, len(big)), big),
        "1.1 M empty series": _request("/api/v1/write", _write_headers(token, len(tiny)), tiny),
        "sample at 2^62 ms": _request("/api/v1/write", _write_headers(token, len(far)), far),
        "300 MiB dictionary bomb": _request(
            "/v1/batches/gpu_samples", _batch_headers(rng, token, len(bomb)), bomb
        ),
    }


_FIELDS = [
    "DCGM_FI_DEV_GPU_UTIL",
    "DCGM_FI_DEV_SM_CLOCK",
    "DCGM_FI_DEV_MEM_CLOCK",
    "DCGM_FI_DEV_GPU_TEMP",
    "DCGM_FI_DEV_POWER_USAGE",
    "DCGM_FI_DEV_FB_USED",
    "DCGM_FI_DEV_FB_FREE",
    "DCGM_FI_DEV_MEM_COPY_UTIL",
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
    "DCGM_FI_PROF_SM_ACTIVE",
    "DCGM_FI_PROF_SM_OCCUPANCY",
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
    "DCGM_FI_PROF_DRAM_ACTIVE",
    "DCGM_FI_PROF_PCIE_TX_BYTES",
    "DCGM_FI_PROF_PCIE_RX_BYTES",
]


def catch_up(token: str, *, hosts: int, series_per_host: int, samples: int, tag: str) -> bytes:
    """A remote_write request within the limits: `hosts` x 8 GPUs, `series_per_host` series a
    host of `samples` samples 1 s apart (so it completes about `samples` - 1 scrapes a host).
    Prometheus sends one sample a series normally, many after an outage (catching up its WAL)."""
    series = []
    for host in range(hosts):
        for index in range(series_per_host):
            gpu, field = divmod(index, len(_FIELDS))
            labels = {
                "__name__": _FIELDS[field],
                "gpu": str(gpu),
                "UUID": f"GPU-{tag}-{host}-{gpu}",
                "modelName": "NVIDIA H100 80GB HBM3",
                "Hostname": f"catchup-{tag}-{host}",
                "job": "dcgm",
                "instance": f"catchup-{tag}-{host}:9400",
            }
            series.append(Series(labels, [(T0 + 1000 * k, float(k % 100)) for k in range(samples)]))
    body = encode_write_request(series)
    return _request("/api/v1/write", _write_headers(token, len(body)), body)


def within_limits(token: str) -> dict[str, bytes]:
    """Requests the server must store and answer 204 within 2 s (issue 28), by the number of
    scrapes they complete: Prometheus's usual request, and two catch-up requests."""
    return {
        "8 hosts, 2,000 x 1 sample": catch_up(
            token, hosts=8, series_per_host=250, samples=1, tag="a"
        ),
        "1 host, 240 x 100 samples": catch_up(
            token, hosts=1, series_per_host=240, samples=100, tag="b"
        ),
        "1 host, 20 x 1,000 samples": catch_up(
            token, hosts=1, series_per_host=20, samples=1000, tag="c"
        ),
    }


def main() -> int:
    """Time the answer to each of the issue's requests against a real server process."""
    import tempfile
    import time
    from pathlib import Path

    from bench.fuzz import start_server

    token = "hostile-" + "0123456789abcdef" * 2
    with tempfile.TemporaryDirectory(prefix="hostile-") as tmp:
        process, url = start_server(Path(tmp) / "data", token)
        try:
            port = int(url.rsplit(":", 1)[1])
            warm = catch_up(token, hosts=1, series_per_host=15, samples=3, tag="warm")
            send_raw(port, warm)  # the first stored request imports pandas: not the answer's cost
            cases = issue_cases(token) | within_limits(token)
            for name, request in cases.items():
                started = time.perf_counter()
                status = send_raw(port, request)
                elapsed = time.perf_counter() - started
                print(f"{name:26s} {len(request):>9,} bytes -> {status} in {elapsed:.2f} s")
        finally:
            process.terminate()
            process.wait(60)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
