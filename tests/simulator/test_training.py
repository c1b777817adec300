"""Live mode's training processes talk to real agent sockets (StepReceiver) and report exactly the
steps batch mode generates for the same seconds, each step once, each rank under its own pid."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from collector.sdk.receiver import StepReceiver
from simulator.sim import FleetSimulator
from simulator.training import TrainingProcesses, socket_template

from .conftest import T0

STEP_COLUMNS = ("host", "job_id", "rank", "pid", "step", "step_time_s", "data_wait_s",
                "batch_size", "dataloader_workers", "flops_per_step", "compute_dtype")  # fmt: skip


@pytest.fixture
def sock_dir() -> Iterator[Path]:
    folder = Path(f"/tmp/fs-sim-{time.monotonic_ns():x}")  # AF_UNIX paths: < 108 bytes
    folder.mkdir()
    yield folder
    shutil.rmtree(folder)


def test_each_hosts_ranks_send_the_batch_models_steps_to_that_hosts_agent(
    sim: FleetSimulator, sock_dir: Path
) -> None:
    t = T0 + 6 * 3600  # mid-morning of the simulated Monday: jobs are running
    receivers = {
        host.name: StepReceiver(sock_dir / f"{host.name}.sock", host=host.name).start()
        for host in sim.hosts
    }
    players = TrainingProcesses(sim, time.time, socket_template(str(sock_dir / "{host}.sock")))
    try:
        sent = players.play(t) + players.play(t)  # the same second twice: nothing new the 2nd time
        sent += players.play(t + 30)
        expected = {
            tuple(row[c] for c in STEP_COLUMNS)
            for second in (t, t + 30)
            for row in sim.tables(second, second + 1, 1)["step_samples"].to_pylist()
        }
        assert len(expected) > 10 and sent == len(expected)
        received: list[dict[str, object]] = []
        deadline = time.monotonic() + 10
        while len(received) < sent:
            assert time.monotonic() < deadline, f"{len(received)} of {sent} steps arrived"
            for receiver in receivers.values():
                received += receiver.drain_steps().to_pylist()
            time.sleep(0.01)
        assert {tuple(row[c] for c in STEP_COLUMNS) for row in received} == expected
        assert len(received) == len(expected)
        pids = {(p.host, p.pid) for r in receivers.values() for p in r.processes()}
        assert {(row["host"], row["pid"]) for row in received} <= pids
        assert players.dropped == 0
    finally:
        players.stop()
        for receiver in receivers.values():
            receiver.stop()


def test_with_no_agent_listening_datagrams_are_dropped_and_counted(
    sim: FleetSimulator, sock_dir: Path
) -> None:
    players = TrainingProcesses(
        sim, time.time, socket_template(str(sock_dir / "agent-{index}.sock"))
    )
    try:
        assert players.play(T0 + 6 * 3600) == 0
        assert players.dropped > 0 and players.sent == 0
    finally:
        players.stop()
