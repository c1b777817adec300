"""The agent's profiling relay and SDK wiring with real sockets: a real HTTP peer on loopback
playing the server's profiling API, a real StepReceiver, and a training process played at the
protocol level (collector/sdk/messages.py datagrams on a real control socket)."""

from __future__ import annotations

import gzip
import json
import socket
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from collector.http import KeepAliveTransport
from collector.metrics import AgentMetrics
from collector.profile_relay import ProfileRelay
from collector.sdk import messages
from collector.sdk.receiver import StepReceiver
from collector.trace_uploader import MAX_ATTEMPTS, TraceUploader


@dataclass
class Peer:
    """Answers /v1/agent/poll with queued request lists and /v1/traces with `trace_status`."""

    polls: list[dict[str, Any]] = field(default_factory=list)
    uploads: list[tuple[dict[str, str], bytes]] = field(default_factory=list)
    to_hand_out: list[list[dict[str, Any]]] = field(default_factory=list)
    trace_status: int = 201
    max_trace_bytes: int = 1 << 20
    url: str = ""


@pytest.fixture
def peer() -> Iterator[Peer]:
    state = Peer()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            assert self.headers["Authorization"] == "Bearer tok"
            parts = urllib.parse.urlsplit(self.path)
            if parts.path == "/v1/agent/poll":
                state.polls.append(json.loads(body))
                requests = state.to_hand_out.pop(0) if state.to_hand_out else []
                answer = {"requests": requests, "max_trace_bytes": state.max_trace_bytes}
                self._send(200, answer)
            else:
                query = {k: v[0] for k, v in urllib.parse.parse_qs(parts.query).items()}
                state.uploads.append((query, body))
                self._send(state.trace_status, {"error": "scripted"})

        def _send(self, status: int, payload: object) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield state
    server.shutdown()
    server.server_close()


class FakeTrainer:
    """A training process at the protocol level: hello with a control socket, then traces."""

    def __init__(self, agent_socket: Path, control: Path, *, pid: int, job_id: str, rank: int):
        self.agent_socket = str(agent_socket)
        self.pid = pid
        self.control = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.control.bind(str(control))
        self.control.settimeout(5)
        self.sender = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.send("hello", job_id=job_id, rank=rank, control=str(control), host="x")

    def send(self, kind: str, **fields: Any) -> None:
        self.sender.sendto(messages.encode(kind, pid=self.pid, **fields), self.agent_socket)

    def next_request(self) -> dict[str, Any]:
        return messages.decode(self.control.recv(messages.MAX_DATAGRAM_BYTES))

    def close(self) -> None:
        self.control.close()
        self.sender.close()


@dataclass
class Rig:
    receiver: StepReceiver
    relay: ProfileRelay
    trace_dir: Path
    sock_dir: Path

    def trainer(self, *, pid: int, job_id: str = "train-1", rank: int = 0) -> FakeTrainer:
        trainer = FakeTrainer(
            self.receiver.socket_path, self.sock_dir / f"sdk-{pid}.sock", pid=pid, job_id=job_id,
            rank=rank,
        )  # fmt: skip
        wait_for(lambda: any(p.pid == pid for p in self.receiver.processes()), "hello")
        return trainer


def wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.01)


@pytest.fixture
def rig(peer: Peer, tmp_path: Path) -> Iterator[Rig]:
    sock_dir = Path(f"/tmp/fs-relay-{id(tmp_path):x}")  # AF_UNIX paths stay under 108 bytes
    sock_dir.mkdir()
    receiver = StepReceiver(sock_dir / "agent.sock", host="node-a").start()
    metrics = AgentMetrics()
    transport = KeepAliveTransport()
    relay: ProfileRelay

    def report(request_id: int, pid: int, error: str) -> None:
        relay.report(request_id, pid, error)

    uploader = TraceUploader(
        ingest_url=peer.url, token="tok", transport=transport, metrics=metrics, report=report,
        backoff_cap_s=0.001,
    )  # fmt: skip
    relay = ProfileRelay(
        receiver, ingest_url=peer.url, token="tok", host=lambda: "node-a", transport=transport,
        trace_dir=tmp_path / "traces", poll_interval_s=0.05, uploader=uploader, metrics=metrics,
    )  # fmt: skip
    try:
        yield Rig(receiver, relay, tmp_path / "traces", sock_dir)
    finally:
        receiver.stop()
        for leftover in sock_dir.iterdir():
            leftover.unlink()
        sock_dir.rmdir()


def request(request_id: int, pids: list[int], **extra: Any) -> dict[str, Any]:
    return {"request_id": request_id, "job_id": "train-1", "rank": None, "steps": 5,
            "duration_s": None, "pids": pids, **extra}  # fmt: skip


def write_trace(folder: Path, name: str, content: bytes = b'{"traceEvents": []}') -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_bytes(gzip.compress(content))
    return path


def test_a_request_reaches_the_process_and_its_trace_is_uploaded(rig: Rig, peer: Peer) -> None:
    trainer = rig.trainer(pid=4242, rank=3)
    peer.to_hand_out.append([request(7, [4242])])
    assert rig.relay.poll()
    assert peer.polls[0] == {
        "host": "node-a",
        "processes": [{"pid": 4242, "job_id": "train-1", "rank": 3}],
        "results": [],
    }
    asked = trainer.next_request()
    assert (asked["type"], asked["request_id"], asked["steps"], asked["duration_s"]) == (
        "profile", "7", 5, None,
    )  # fmt: skip
    assert asked["out_dir"] == str(rig.trace_dir)
    path = write_trace(rig.trace_dir, "trace-7-rank3-pid4242.pt.trace.json.gz")
    body = path.read_bytes()
    trainer.send("trace", request_id="7", path=str(path), error=None)
    wait_for(lambda: not rig.receiver.traces.empty(), "trace notice")
    rig.relay.collect_traces()
    rig.relay.uploader.upload_due("node-a")
    assert peer.uploads == [
        ({"request_id": "7", "host": "node-a", "pid": "4242", "rank": "3"}, body)
    ]
    assert not path.exists()  # stored on the server: the local copy is gone
    trainer.close()


def test_what_cannot_be_done_is_reported_on_the_next_poll(rig: Rig, peer: Peer) -> None:
    trainer = rig.trainer(pid=5)
    gone = rig.trainer(pid=6)
    gone.close()
    (rig.sock_dir / "sdk-6.sock").unlink()  # the process exited: its control socket is gone
    trainer.sender.sendto(  # an SDK that could not bind a control socket says control: null
        messages.encode("hello", pid=7, job_id="train-1", rank=1, control=None, host="x"),
        str(rig.receiver.socket_path),
    )
    wait_for(lambda: len(rig.receiver.processes()) == 3, "the third hello")
    peer.to_hand_out.append([request(8, [5, 6, 7, 999])])
    rig.relay.poll()
    trainer.next_request()
    trainer.send("trace", request_id="8", path=None, error="could not start torch.profiler: x")
    wait_for(lambda: not rig.receiver.traces.empty(), "trace notice")
    rig.relay.collect_traces()
    rig.relay.poll()
    results = {(r["request_id"], r["pid"]): r["error"] for r in peer.polls[1]["results"]}
    assert (
        results[(8, 5)] == "the profiler in the process failed: could not start torch.profiler: x"
    )
    assert results[(8, 6)].startswith("cannot reach the process's SDK control socket /tmp/")
    assert results[(8, 7)].startswith("the process has no SDK control socket")
    assert results[(8, 999)] == "the process is no longer known to the agent"
    rig.relay.poll()
    assert peer.polls[2]["results"] == []  # reported once
    trainer.close()


def test_an_upload_ingest_keeps_refusing_is_retried_then_reported(rig: Rig, peer: Peer) -> None:
    trainer = rig.trainer(pid=5)
    peer.to_hand_out.append([request(9, [5])])
    peer.trace_status = 503
    rig.relay.poll()
    trainer.next_request()
    path = write_trace(rig.trace_dir, "t.pt.trace.json.gz")
    trainer.send("trace", request_id="9", path=str(path), error=None)
    wait_for(lambda: not rig.receiver.traces.empty(), "trace notice")
    rig.relay.collect_traces()
    while rig.relay.uploader.pending:
        rig.relay.uploader.upload_due("node-a")
    assert len(peer.uploads) == MAX_ATTEMPTS
    rig.relay.poll()
    (result,) = peer.polls[-1]["results"]
    assert result["error"] == (
        f'trace upload failed {MAX_ATTEMPTS} times, last: HTTP 503: {{"error": "scripted"}}; '
        f"kept at {path}"
    )
    assert path.exists()
    trainer.close()


def test_a_trace_over_the_servers_limit_is_reported_not_sent(rig: Rig, peer: Peer) -> None:
    trainer = rig.trainer(pid=5)
    peer.to_hand_out.append([request(10, [5])])
    peer.max_trace_bytes = 10
    rig.relay.poll()
    trainer.next_request()
    path = write_trace(rig.trace_dir, "big.pt.trace.json.gz")
    trainer.send("trace", request_id="10", path=str(path), error=None)
    wait_for(lambda: not rig.receiver.traces.empty(), "trace notice")
    rig.relay.collect_traces()
    rig.relay.uploader.upload_due("node-a")
    assert peer.uploads == []
    rig.relay.poll()
    (result,) = peer.polls[-1]["results"]
    size = path.stat().st_size
    assert result["error"].startswith(
        f"the trace of {size} bytes is over the server's limit of 10 bytes"
    )
    trainer.close()


def test_the_relay_thread_polls_until_stopped_and_survives_a_dead_server(rig: Rig) -> None:
    rig.relay.ingest_url = "http://127.0.0.1:9"  # nothing listens: every poll fails
    rig.relay.uploader.ingest_url = rig.relay.ingest_url
    stop = threading.Event()
    thread = threading.Thread(target=rig.relay.run, args=(stop,))
    thread.start()
    wait_for(
        lambda: rig.relay.metrics.errors.labels("profile_poll")._value.get() >= 3, "three polls"
    )
    stop.set()
    thread.join(timeout=5)
    assert not thread.is_alive()
