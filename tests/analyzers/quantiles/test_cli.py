"""`fleetscope quantiles` on a small published warehouse, after the analyzers kept its sketches."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.cli import main
from simulator.maker.series import Fleet
from simulator.maker.tables import publish


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> str:
    """One backfilled warehouse for the module's tests: `quantiles` only reads it."""
    tmp_path = tmp_path_factory.mktemp("quantiles")
    fleet = Fleet()
    fleet.gpus("idle", "h1", range(2), 0, 180, gpu_util=0.0)
    fleet.gpus("busy", "h2", range(1), 0, 180, gpu_util=lambda i, t: float(i % 101))
    fleet.steps("busy", "h2", 0, 0, 500, step_time_s=lambda i, t: 0.5 if i % 50 else 2.0)
    publish(fleet, tmp_path / "var" / "segments")
    path = tmp_path / "fleetscope.toml"
    path.write_text(f'[core]\ndata_dir = "{tmp_path / "var"}"\n')
    assert (
        main(["--config", str(path), "backfill", "--start", "2025-03-03", "--end", "2025-03-04"])
        == 0
    )
    return str(path)


def test_quantiles_by_job_as_a_table_and_json(
    config: str, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    argv = ["--config", config, "quantiles", "gpu_util_pct", "--end", "2025-03-05"]
    assert main([*argv, "--by", "job", "--q", "0.5,0.99"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("gpu_util_pct (%, GPU utilization")
    assert "from 2025-02-26 00:00 to 2025-03-05 00:00 UTC, by job" in lines[0]
    # utilization is a small integer: exact; 1080 samples of 0..100 repeating
    assert lines[1:] == [
        "job   count  mean  p50  p99  max",
        "busy   1080    49   49   99  100",
        "idle   2160     0    0    0    0",
    ]
    assert main([*argv, "--json", "--window", "1d"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["start"] == "2025-03-04T00:00:00+00:00" and payload["groups"] == []
    step = ["--config", config, "quantiles", "step_time_s", "--end", "2025-03-04", "--json"]
    assert main([*step, "--by", "team", "--q", "0.5,0.99,1"]) == 0
    (group,) = json.loads(capsys.readouterr().out)["groups"]
    assert (group["team"], group["count"], group["p100"], group["max"]) == ("-", 500, 2.0, 2.0)
    assert group["p50"] == pytest.approx(0.5, rel=0.01) and group["p99"] == 2.0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["quantiles", "gpu_utilization"], "unknown metric 'gpu_utilization'; sketched metrics:"),
        (["quantiles", "gpu_util_pct", "--q", "50,99"], "--q '50,99': expected numbers in [0, 1]"),
        (["quantiles", "gpu_util_pct", "--window", "a week"], "duration 'a week'"),
    ],
)
def test_bad_input_is_a_clear_error(
    config: str, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    capsys.readouterr()
    assert main(["--config", config, *args]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_the_dashboard_and_the_cli_give_the_same_fleet_percentiles(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 15: the dashboard said p50 active = 94 % where `fleetscope quantiles` said 0 %, as
    one counted unallocated GPUs. Both now read analyzers.quantiles.fleet_percentiles; here a busy job's GPU
    sits beside two GPUs no job holds."""
    from datetime import UTC, datetime

    from analyzers.quantiles.tiers import QuantileStore
    from dashboard import data
    from fleetscope.settings import load_settings

    fleet = Fleet()
    fleet.gpus(None, "h1", range(2), 0, 180, gpu_util=0.0, gr_engine_active=0.0)
    fleet.gpus("busy", "h2", range(1), 0, 180, gr_engine_active=lambda i, t: 0.5 + (i % 41) / 100)
    publish(fleet, tmp_path / "var" / "segments")
    path = tmp_path / "fleetscope.toml"
    path.write_text(f'[core]\ndata_dir = "{tmp_path / "var"}"\n')
    argv = ["--config", str(path)]
    assert main([*argv, "backfill", "--start", "2025-03-03", "--end", "2025-03-04"]) == 0
    capsys.readouterr()
    end = datetime(2025, 3, 4, tzinfo=UTC)
    cli = [*argv, "quantiles", "active_pct", "--end", end.isoformat(), "--window", "1d", "--json"]

    assert main([*cli, "--q", "0.5,0.9,0.99"]) == 0
    (allocated,) = json.loads(capsys.readouterr().out)["groups"]
    assert main([*cli, "--q", "0.5,0.9,0.99", "--gpus", "all"]) == 0
    (every_gpu,) = json.loads(capsys.readouterr().out)["groups"]

    store = QuantileStore.from_settings(load_settings(str(path)))
    con = store.connect()
    try:
        window = data.Window(datetime(2025, 3, 3, tzinfo=UTC), end, bucket_s=3600)
        shown = data.sketch_percentiles(con, window)
    finally:
        con.close()
    assert shown is not None
    assert shown["active_pct"].tolist() == [allocated["p50"], allocated["p90"], allocated["p99"]]
    assert allocated["count"] == 1080 and every_gpu["count"] == 3 * 1080
    assert allocated["p50"] == pytest.approx(70, rel=0.01)
    assert every_gpu["p50"] == 0.0
