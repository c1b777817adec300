"""The SDK inside a real PyTorch training loop: a Dataset that sleeps creates a real data stall."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from collector.sdk.monitor import StepMonitor
from collector.sdk.receiver import StepReceiver

torch = pytest.importorskip("torch", reason="real PyTorch is required for SDK tests")

SLEEP_PER_ITEM_S = 0.004
BATCH = 8
ITEMS = 64  # 8 steps per epoch


class SleepyDataset(torch.utils.data.Dataset):  # type: ignore[misc]
    """Each item costs SLEEP_PER_ITEM_S of host time, as slow decoding would."""

    def __len__(self) -> int:
        return ITEMS

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        time.sleep(SLEEP_PER_ITEM_S)
        return torch.randn(16), torch.tensor(index % 2)


def train(loader: object, monitor: StepMonitor, epochs: int = 1) -> None:
    model = torch.nn.Linear(16, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(epochs):
        for features, labels in monitor.wrap(loader):  # type: ignore[call-overload]
            optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(features), labels)
            loss.backward()
            optimizer.step()


@pytest.fixture
def receiver(tmp_path: Path) -> object:
    receiver = StepReceiver(tmp_path / "agent.sock", host="node-1", cluster="lab").start()
    yield receiver
    receiver.stop()


def wait_for_steps(receiver: StepReceiver, count: int) -> list[dict[str, object]]:
    deadline = time.monotonic() + 10
    rows: list[dict[str, object]] = []
    while time.monotonic() < deadline and len(rows) < count:
        rows += receiver.drain_steps().to_pylist()
        time.sleep(0.05)
    return rows


def test_every_step_is_reported_with_its_data_wait(receiver: StepReceiver, tmp_path: Path) -> None:
    monitor = StepMonitor(str(receiver.socket_path), job_id="918273", rank=3, host="node-1")
    loader = torch.utils.data.DataLoader(SleepyDataset(), batch_size=BATCH, num_workers=0)
    train(loader, monitor, epochs=2)
    rows = wait_for_steps(receiver, 2 * ITEMS // BATCH)
    monitor.close()

    assert [row["step"] for row in rows] == list(range(1, 17))
    assert {(row["job_id"], row["rank"], row["host"], row["cluster"]) for row in rows} == {
        ("918273", 3, "node-1", "lab")
    }
    assert {row["batch_size"] for row in rows} == {BATCH}
    assert {row["dataloader_workers"] for row in rows} == {0}
    for row in rows:
        # The loader slept BATCH x SLEEP_PER_ITEM_S inside __next__: all of it is data wait.
        assert row["data_wait_s"] >= BATCH * SLEEP_PER_ITEM_S
        assert row["step_time_s"] > row["data_wait_s"]
        assert row["samples_per_s"] == pytest.approx(BATCH / row["step_time_s"])
    assert monitor.dropped == 0


def test_without_an_agent_training_goes_on_and_samples_are_counted_dropped(tmp_path: Path) -> None:
    monitor = StepMonitor(str(tmp_path / "nobody.sock"), job_id="j", listen=False)
    loader = torch.utils.data.DataLoader(SleepyDataset(), batch_size=BATCH)
    train(loader, monitor)
    monitor.close()
    assert monitor.sent == 0
    assert monitor.dropped == 1 + ITEMS // BATCH  # the hello and every step


def test_a_requested_profile_writes_a_kineto_trace_of_those_steps(
    receiver: StepReceiver, tmp_path: Path
) -> None:
    monitor = StepMonitor(str(receiver.socket_path), job_id="j", rank=0)
    monitor.request_profile("req-1", str(tmp_path / "traces"), steps=3)
    loader = torch.utils.data.DataLoader(SleepyDataset(), batch_size=BATCH)
    train(loader, monitor)
    notice = receiver.traces.get(timeout=10)
    monitor.close()

    assert (notice.request_id, notice.error) == ("req-1", None)
    assert notice.path is not None and notice.path.endswith(".pt.trace.json.gz")
    with gzip.open(notice.path) as handle:
        trace = json.load(handle)
    names = {event.get("name", "") for event in trace["traceEvents"]}
    assert {"ProfilerStep#1", "ProfilerStep#2", "ProfilerStep#3"} <= names
    assert any(name.startswith("enumerate(DataLoader)") for name in names)


def test_a_second_request_waits_its_turn_instead_of_replacing_the_first(
    receiver: StepReceiver, tmp_path: Path
) -> None:
    """A user's `fleetscope profile` and an automatic profile (issue 18) can reach the same
    process before its next step: both are recorded, oldest first; the same id twice runs once."""
    monitor = StepMonitor(str(receiver.socket_path), job_id="j", rank=0)
    monitor.request_profile("user-1", str(tmp_path / "traces"), steps=2)
    monitor.request_profile("auto-2", str(tmp_path / "traces"), steps=2)
    monitor.request_profile("user-1", str(tmp_path / "traces"), steps=2)
    train(torch.utils.data.DataLoader(SleepyDataset(), batch_size=BATCH), monitor)
    notices = [receiver.traces.get(timeout=10) for _ in range(2)]
    monitor.close()
    assert [(n.request_id, n.error) for n in notices] == [("user-1", None), ("auto-2", None)]
    assert receiver.traces.empty()


def test_a_profile_request_through_the_control_socket_reaches_the_training_thread(
    receiver: StepReceiver, tmp_path: Path
) -> None:
    monitor = StepMonitor(str(receiver.socket_path), job_id="j", rank=0)
    (process,) = wait_for_process(receiver)
    assert process.control == monitor.control_path
    out_dir = tmp_path / "traces"
    assert receiver.request_profile(
        process, {"request_id": "r2", "steps": 2, "out_dir": str(out_dir)}
    )
    time.sleep(0.2)  # the datagram is delivered asynchronously to the listener thread
    train(torch.utils.data.DataLoader(SleepyDataset(), batch_size=BATCH), monitor)
    notice = receiver.traces.get(timeout=10)
    monitor.close()
    assert notice.request_id == "r2" and notice.path and Path(notice.path).parent == out_dir


def wait_for_process(receiver: StepReceiver) -> list[object]:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        if processes := receiver.processes():
            return processes  # type: ignore[return-value]
        time.sleep(0.02)
    raise AssertionError("the SDK's hello never arrived")


def test_no_code_path_measures_an_unmodified_script(receiver: StepReceiver, tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(
        textwrap.dedent(
            """
            import torch
            data = torch.utils.data.TensorDataset(torch.randn(40, 4), torch.zeros(40, dtype=torch.long))
            loader = torch.utils.data.DataLoader(data, batch_size=10)
            model = torch.nn.Linear(4, 2)
            for x, y in loader:
                torch.nn.functional.cross_entropy(model(x), y).backward()
            """
        )
    )
    autostart = Path(__file__).parents[3] / "collector" / "sdk" / "autostart"
    env = {
        **os.environ,
        "FLEETSCOPE_SDK": "1",
        "FLEETSCOPE_AGENT_SDK_SOCKET": str(receiver.socket_path),
        "FLEETSCOPE_JOB_ID": "nocode-1",
        "PYTHONPATH": os.pathsep.join([str(autostart), os.environ.get("PYTHONPATH", "")]),
    }
    subprocess.run([sys.executable, str(script)], env=env, check=True, timeout=120)
    rows = wait_for_steps(receiver, 4)
    assert [(row["job_id"], row["step"], row["batch_size"]) for row in rows] == [
        ("nocode-1", step, 10) for step in range(1, 5)
    ]
