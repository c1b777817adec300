"""Mutation fuzzing of a real `fleetscope server` process: Arrow, remote_write and trace bodies.

    .venv/bin/python -m bench.fuzz --cases 20000     # the long run (make fuzz)
    tests/warehouse/test_fuzz_ingest.py              # the bounded run in make test

Seeds are real request bodies under tests/data/ingest/. Each case takes one seed and applies 1-4
of the mutations that found issue 12's segfault: bit flips, truncation, inserted bytes,
interesting integers written over 1/2/4/8 bytes, duplicated slices. Every case is sent on a
kept-alive connection as an authenticated client would. A case fails when the answer is a 5xx,
the connection drops without an answer, or the server process dies; failing bodies are written
to --crashes for replay. After the run the rows committed before it must all still be there.
Then issue 28's hostile kinds (bench/fuzz_hostile.py: dictionary, series and sample bombs, odd
header bytes, framing conflicts), one per 100 body cases, as raw requests.
Trace cases each get their own matched process (one profile request, many reported pids), so a
mutated trace reaches the gzip and JSON checks instead of a 409.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import http.client
import json
import os
import random
import socket
import subprocess
import sys
import time
import urllib.parse
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "ingest"
INTERESTING = (0, 1, -1, 0x7F, 0x80, 0xFF, 0x7FFF, 0x8000, 0xFFFF, 2**31 - 1, -(2**31), 2**32 - 1)
TRACE_JOB = "fuzz-job"
TRACE_HOST = "fuzz-host"


def mutate(rng: random.Random, seed: bytes) -> bytes:
    body = bytearray(seed)
    for _ in range(rng.randint(1, 4)):
        kind = rng.choice(("flip", "truncate", "insert", "integer", "duplicate"))
        at = rng.randrange(max(len(body), 1))
        if kind == "flip" and body:
            body[at] ^= 1 << rng.randrange(8)
        elif kind == "truncate":
            del body[at:]
        elif kind == "insert":
            body[at:at] = rng.randbytes(rng.randint(1, 16))
        elif kind == "integer":
            width = rng.choice((1, 2, 4, 8))
            value = rng.choice(INTERESTING) & ((1 << (8 * width)) - 1)
            body[at : at + width] = value.to_bytes(width, "little")
        elif kind == "duplicate":
            end = min(len(body), at + rng.randint(1, 256))
            body[at:at] = body[at:end]
    return bytes(body)


@dataclass(frozen=True)
class Target:
    name: str
    seed: bytes
    request: Callable[[int, str], tuple[str, dict[str, str]]]  # (case, token) -> path, headers


def _arrow(table: str) -> Target:
    from fleetscope.contract import ARROW_STREAM_MEDIA_TYPE, HEADER_BATCH_ID, HEADER_SCHEMA_VERSION

    def request(case: int, token: str) -> tuple[str, dict[str, str]]:
        return f"/v1/batches/{table}", {
            "Authorization": f"Bearer {token}",
            "Content-Type": ARROW_STREAM_MEDIA_TYPE,
            HEADER_SCHEMA_VERSION: "1",
            HEADER_BATCH_ID: f"fuzz-{table}-{case}",
        }

    return Target(table, (DATA / f"seed-{table}.arrows").read_bytes(), request)


def _remote_write() -> Target:
    def request(case: int, token: str) -> tuple[str, dict[str, str]]:
        return "/api/v1/write", {
            "Authorization": f"Bearer {token}",
            "Content-Type": "application/x-protobuf",
            "Content-Encoding": "snappy",
            "X-Prometheus-Remote-Write-Version": "0.1.0",
        }

    return Target("remote_write", (DATA / "seed-remote_write.bin").read_bytes(), request)


def _trace(request_id: int) -> Target:
    def request(case: int, token: str) -> tuple[str, dict[str, str]]:
        query = urllib.parse.urlencode(
            {"request_id": request_id, "host": TRACE_HOST, "pid": 1000 + case, "rank": 0}
        )
        return f"/v1/traces?{query}", {"Authorization": f"Bearer {token}"}

    return Target("trace", (DATA / "seed-trace.json.gz").read_bytes(), request)


def seed_remote_write() -> bytes:
    """The remote_write seed: what Prometheus sends for one dcgm-exporter scrape of two GPUs."""
    from warehouse.prometheus.prompb import Series, encode_write_request

    ts = 1_700_000_000_000
    series = [
        Series(
            {"__name__": name, "gpu": str(g), "UUID": f"GPU-{g}", "Hostname": "h1", "job": "dcgm"},
            [(ts, value)],
        )
        for g in range(2)
        for name, value in (("DCGM_FI_DEV_GPU_UTIL", 50.0), ("DCGM_FI_PROF_SM_ACTIVE", 0.5))
    ]
    return encode_write_request(series)


def seed_trace() -> bytes:
    event = {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1.0, "dur": 2.0}
    trace = {"schemaVersion": 1, "traceEvents": [event], "deviceProperties": []}
    return gzip.compress(json.dumps(trace).encode(), mtime=0)


@dataclass
class Report:
    statuses: Counter[str] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)

    def line(self) -> str:
        answers = ", ".join(f"{k}: {v}" for k, v in sorted(self.statuses.items()))
        return f"{sum(self.statuses.values())} cases; {answers}; failures {len(self.failures)}"


class Client:
    """One kept-alive connection, reopened when the server closes it after an answer."""

    def __init__(self, url: str) -> None:
        parts = urllib.parse.urlsplit(url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.conn: http.client.HTTPConnection | None = None

    def send(
        self, method: str, path: str, body: bytes, headers: dict[str, str]
    ) -> tuple[int, bytes]:
        if self.conn is None:
            self.conn = http.client.HTTPConnection(self.host, self.port, timeout=60)
        self.conn.request(method, path, body=body, headers=headers)
        response = self.conn.getresponse()
        data = response.read()
        if response.will_close:
            self.close()
        return response.status, data

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def prepare_traces(client: Client, token: str, cases: int) -> int:
    """One profile request matched to `cases` processes: every trace case has its own pid."""
    auth = {"Authorization": f"Bearer {token}"}
    client.send("POST", "/v1/jobs", json.dumps([{"job_id": TRACE_JOB}]).encode(), auth)
    status, body = client.send(
        "POST", "/v1/profile-requests", json.dumps({"job_id": TRACE_JOB, "steps": 1}).encode(), auth
    )
    assert status == 201, body
    request_id = int(json.loads(body)["id"])
    processes = [{"pid": 1000 + c, "job_id": TRACE_JOB, "rank": 0} for c in range(cases)]
    poll = json.dumps({"host": TRACE_HOST, "processes": processes}).encode()
    status, body = client.send("POST", "/v1/agent/poll", poll, auth)
    assert status == 200, body
    return request_id


def run(
    url: str,
    token: str,
    *,
    cases: int,
    seed: int,
    alive: Callable[[], bool],
    crashes: Path | None = None,
) -> Report:
    """Send `cases` mutated bodies round-robin over the targets; the report of what came back."""
    client = Client(url)
    trace_cases = cases // 4 + 1
    targets = [
        _arrow("gpu_samples"),
        _arrow("host_samples"),
        _remote_write(),
        _trace(prepare_traces(client, token, trace_cases)),
    ]
    rng = random.Random(seed)
    report = Report()
    for case in range(cases):
        target = targets[case % len(targets)]
        body = mutate(rng, target.seed)
        path, headers = target.request(case // len(targets), token)
        try:
            status, answer = client.send("POST", path, body, headers)
        except (OSError, http.client.HTTPException) as exc:
            client.close()
            status, answer = -1, f"no answer: {exc}".encode()
        report.statuses[f"{target.name} {status}"] += 1
        if status >= 500 or status < 0 or not alive():
            digest = hashlib.sha256(body).hexdigest()[:12]
            report.failures.append(f"case {case} {target.name} -> {status} {answer[:200]!r}")
            if crashes is not None:
                crashes.mkdir(parents=True, exist_ok=True)
                (crashes / f"{target.name}-{digest}.bin").write_bytes(body)
            if not alive():
                break
    client.close()
    return report


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_server(
    data_dir: Path, token: str, *, port: int = 0, **env: str
) -> tuple[subprocess.Popen[bytes], str]:
    """A real `fleetscope server` process on loopback; returns it and its URL once it answers."""
    port = port or free_port()
    environ = {
        **os.environ,
        "FLEETSCOPE_CORE_DATA_DIR": str(data_dir),
        "FLEETSCOPE_SERVER_TOKENS": token,
        "FLEETSCOPE_SERVER_PLUGINS": "",
        "FLEETSCOPE_WAREHOUSE_FLUSH_INTERVAL_S": "0.05",
        "FLEETSCOPE_WAREHOUSE_MAINTENANCE_INTERVAL_S": "3600",
        **env,
    }
    argv = [sys.executable, "-m", "app.cli", "server", "--host", "127.0.0.1"]
    with (data_dir.parent / f"server-{port}.log").open("ab") as log:
        process = subprocess.Popen(
            [*argv, "--port", str(port)], env=environ, stdout=log, stderr=subprocess.STDOUT
        )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert process.poll() is None, f"server exited with {process.returncode}"
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return process, url
        except OSError:
            time.sleep(0.1)
    process.kill()
    raise TimeoutError("server did not start")


def main(argv: list[str] | None = None) -> int:
    import tempfile

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=int(time.time()))
    parser.add_argument("--crashes", default="var/fuzz-crashes", help="where failing bodies go")
    args = parser.parse_args(argv)
    token = "fuzz-" + os.urandom(16).hex()
    with tempfile.TemporaryDirectory(prefix="fuzz-") as tmp:
        process, url = start_server(Path(tmp) / "data", token)
        try:
            started = time.monotonic()
            report = run(
                url, token, cases=args.cases, seed=args.seed,
                alive=lambda: process.poll() is None, crashes=Path(args.crashes),
            )  # fmt: skip
            elapsed = time.monotonic() - started
            from bench import fuzz_hostile

            hostile = fuzz_hostile.run(
                int(url.rsplit(":", 1)[1]), token, cases=max(args.cases // 100, 10),
                seed=args.seed, alive=lambda: process.poll() is None,
            )  # fmt: skip
        finally:
            process.terminate()
            process.wait(60)
    print(f"seed {args.seed}: {report.line()} in {elapsed:.0f} s; load {os.getloadavg()[0]:.1f}")
    for failure in report.failures[:20]:
        print("  " + failure)
    print(f"hostile kinds (bench/fuzz_hostile.py): {hostile.line()}")
    for failure in hostile.failures[:20]:
        print("  " + failure)
    return 1 if report.failures or hostile.failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
