"""The analyzers' commands end to end on a real warehouse (published segments) and catalog:
backfill, opportunities, job, findings; and clear errors for bad input."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.cli import main
from simulator.maker.series import Fleet
from simulator.maker.tables import publish

IDLE = {"gpu_util": 0.0, "gr_engine_active": 0.0, "sm_active": 0.0, "tensor_active": 0.0}


def write_config(tmp_path: Path) -> str:
    fleet = Fleet().gpus("idle", "h1", range(2), 0, 180, **IDLE).gpus("ok", "h2", range(1), 0, 180)
    fleet.gpus(
        "noprof", "h3", range(1), 0, 60, sm_active=None, tensor_active=None, dram_active=None
    )
    # the SDK in "ok" reported 0.3 x the H100's bf16 peak (989.5 TFLOPS) per 1 s step: 30 % MFU
    fleet.steps("ok", "h2", 0, 0, 600, step_time_s=1.0, flops_per_step=0.3 * 989.5e12,
                compute_dtype="bf16")  # fmt: skip
    publish(fleet, tmp_path / "var" / "segments")
    path = tmp_path / "fleetscope.toml"
    path.write_text(f'[core]\ndata_dir = "{tmp_path / "var"}"\n')
    return str(path)


@pytest.fixture
def config(tmp_path: Path) -> str:
    return write_config(tmp_path)


@pytest.fixture(scope="module")
def unchanged_config(tmp_path_factory: pytest.TempPathFactory) -> str:
    """One warehouse for the bad-input cases: each is refused before it writes anything."""
    return write_config(tmp_path_factory.mktemp("analyzers-cli"))


def test_backfill_then_opportunities_job_and_findings(
    config: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--config", config]
    assert main([*argv, "backfill", "--start", "2025-03-03", "--end", "2025-03-04"]) == 0
    assert "2 finding(s)" in capsys.readouterr().out
    assert main([*argv, "opportunities", "--window", "7d", "--end", "2025-03-05"]) == 0
    out = capsys.readouterr().out
    assert "Recoverable GPU-hours, last 7d: 6.0" in out
    assert "R1            6.0         1      1" in out
    assert "Recoverable energy: 3.6 kWh\n" in out  # 6 GPU-h at the job's 600 W; no prices set
    assert main([*argv, "job", "idle"]) == 0
    out = capsys.readouterr().out
    assert "allocated GPU-hours: 6.00" in out
    # 2 GPUs x 3 h at 600 W, power integrated (the fixture's GPUs report no energy counter)
    assert "energy:              3.60 kWh (power integrated), idle-allocated 3.60 kWh\n" in out
    assert "cost:" not in out  # no prices set
    # no FLOPs from an SDK: only DCGM's proxy, and it says so
    assert "MFU:                 n/a measured; tensor-pipe active (MFU proxy, DCGM): 0.0 %" in out
    assert "Job idle   2025-03-03 00:00 to 02:59 UTC" in out
    assert "  R1   Zero utilization · critical · 6 GPU-h · 3.6 kWh recoverable\n" in out
    assert main([*argv, "job", "ok"]) == 0
    assert (
        "MFU:                 30.0 % measured (2.97e+14 FLOPs/step x 1 steps/s over 1 x 989.5 "
        "TFLOPS (NVIDIA H100 80GB HBM3, bf16, dense))\n" in capsys.readouterr().out
    )
    assert main([*argv, "job", "noprof"]) == 0
    assert "DCGM_FI_PROF_SM_ACTIVE" in capsys.readouterr().out
    assert main([*argv, "findings", "--suppress", "job=idle", "--reason", "known"]) == 0
    capsys.readouterr()
    assert main([*argv, "opportunities", "--end", "2025-03-05"]) == 0
    assert "last 7d: 0.0" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["opportunities", "--window", "seven days"], "duration 'seven days'"),
        (["backfill", "--start", "yesterday", "--end", "2025-03-04"], "time 'yesterday'"),
        (["backfill", "--start", "2025-03-04", "--end", "2025-03-03"], "backfill range is empty"),
        (["job", "nope"], "no GPU samples for job 'nope'"),
        (["findings", "--suppress", "host=h1"], "--suppress takes"),
        (["findings", "--ack", "0123"], "no finding '0123'"),
    ],
)
def test_bad_input_is_a_clear_error(
    unchanged_config: str, args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--config", unchanged_config, *args]) != 0
    assert message in capsys.readouterr().err
