"""Step metrics through the agent: SDK datagrams -> StepReceiver -> agent tick -> spool, as
`step_samples` batches in the contract's schema, stamped with the agent's host; a malformed
datagram is counted and dropped without spoiling the batch."""

from __future__ import annotations

import shutil
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from collector.agent import build_agent
from collector.sdk import messages
from collector.sdk_wiring import attach_sdk, trace_dir
from fleetscope.contract import STEP_SAMPLES, from_ipc
from fleetscope.errors import ConfigError
from fleetscope.settings import Settings, load_settings


@pytest.fixture
def sock_dir() -> Iterator[Path]:
    folder = Path(f"/tmp/fs-wiring-{time.monotonic_ns():x}")  # AF_UNIX paths: < 108 bytes
    folder.mkdir()
    yield folder
    shutil.rmtree(folder)


def agent_settings(tmp_path: Path, sock_dir: Path, **overrides: Any) -> Settings:
    return load_settings(env={}).with_overrides(
        agent__dcgm_url="http://127.0.0.1:9/metrics",  # nothing listens: GPU rows fail, steps flow
        agent__spool_dir=str(tmp_path / "spool"),
        agent__sdk_socket=str(sock_dir / "agent.sock"),
        agent__profile_poll_s=0,
        agent__ship_interval_s=0,
        agent__cgroup_root="",
        agent__proc_root="",
        **overrides,
    )


def step(pid: int, number: int, **changes: Any) -> bytes:
    fields = {"job_id": "train-1", "rank": 2, "step": number, "ts": 1_700_000_000.0 + number,
              "step_time_s": 0.5, "data_wait_s": 0.2, "h2d_copy_s": 0.01, "batch_size": 32,
              "samples_per_s": 64.0, "dataloader_workers": 4}  # fmt: skip
    return messages.encode("step", pid=pid, **{**fields, **changes})


def test_step_datagrams_become_step_samples_batches_in_the_spool(
    tmp_path: Path, sock_dir: Path
) -> None:
    agent = build_agent(agent_settings(tmp_path, sock_dir, agent__host="node-7"))
    agent.host_source = None
    receiver = attach_sdk(agent, agent_settings(tmp_path, sock_dir, agent__host="node-7"))
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sender:
            for datagram in [step(31, 1), step(31, 2, step=None), b"not json", step(31, 3)]:
                sender.sendto(datagram, str(receiver.socket_path))
        deadline = time.monotonic() + 10
        while receiver.malformed < 2:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        time.sleep(0.05)  # the last datagram is handled right after the malformed one
        agent.tick()
    finally:
        for close in agent.closers:
            close()
    (batch,) = agent.shipper.spool.pending()
    assert batch.table == "step_samples"
    table = from_ipc(batch.path.read_bytes())
    assert table.schema == STEP_SAMPLES
    rows = table.to_pylist()
    assert [r["step"] for r in rows] == [1, 3]
    assert {(r["host"], r["job_id"], r["rank"], r["pid"]) for r in rows} == {
        ("node-7", "train-1", 2, 31)
    }
    assert rows[0]["data_wait_s"] == 0.2 and rows[0]["dataloader_workers"] == 4
    assert receiver.malformed == 2
    assert agent.metrics.samples_collected.labels("step_samples")._value.get() == 2


def test_without_agent_host_steps_take_the_exporters_host_name(
    tmp_path: Path, sock_dir: Path
) -> None:
    settings = agent_settings(tmp_path, sock_dir)
    agent = build_agent(settings)
    agent.host_source = None
    receiver = attach_sdk(agent, settings)
    agent.last_gpu_host = "dgx-b03"  # what a scrape of dcgm-exporter's Hostname label sets
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sender:
            sender.sendto(step(8, 1), str(receiver.socket_path))
        deadline = time.monotonic() + 10
        while not receiver.processes():
            assert time.monotonic() < deadline
            time.sleep(0.01)
        agent.tick()
    finally:
        for close in agent.closers:
            close()
    (batch,) = agent.shipper.spool.pending()
    assert from_ipc(batch.path.read_bytes()).column("host").to_pylist() == ["dgx-b03"]


def test_the_trace_folder_defaults_next_to_the_socket(tmp_path: Path, sock_dir: Path) -> None:
    assert trace_dir(agent_settings(tmp_path, sock_dir)) == sock_dir / "traces"
    custom = agent_settings(tmp_path, sock_dir, agent__trace_dir=str(tmp_path / "t"))
    assert trace_dir(custom) == tmp_path / "t"


def test_a_socket_path_that_cannot_be_bound_is_a_config_error(tmp_path: Path) -> None:
    settings = agent_settings(tmp_path, tmp_path / ("x" * 120))
    with pytest.raises(ConfigError, match=r"agent\.sdk_socket: cannot bind"):
        attach_sdk(build_agent(settings), settings)
