"""`fleetscope simulate`, end to end through the real command line."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from app.cli import main
from fleetscope.contract import TABLES


def test_generate_writes_every_table_the_jobs_and_the_truth(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "fleet"
    code = main(
        ["simulate", "--generate", str(out), "--days", "0.25", "--gpus", "24", "--step-s", "30"]
    )
    assert code == 0
    assert "wrote" in capsys.readouterr().out
    for name, schema in TABLES.items():
        table = pq.read_table(out / f"{name}.parquet")
        assert table.schema.equals(schema) and table.num_rows > 0
    truth = [json.loads(line) for line in (out / "truth.jsonl").read_text().splitlines()]
    jobs = [json.loads(line) for line in (out / "jobs.jsonl").read_text().splitlines()]
    assert {t["job_id"] for t in truth} == {j["job_id"] for j in jobs}
    assert all("rules" in t and "wasted_gpu_hours" in t for t in truth)


def test_generate_is_deterministic(tmp_path: Path) -> None:
    args = ["--days", "0.05", "--gpus", "16", "--step-s", "60", "--seed", "5"]
    assert main(["simulate", "--generate", str(tmp_path / "a"), *args]) == 0
    assert main(["simulate", "--generate", str(tmp_path / "b"), *args]) == 0
    for name in (*TABLES, "truth"):
        suffix = ".jsonl" if name == "truth" else ".parquet"
        a = tmp_path / "a" / f"{name}{suffix}"
        b = tmp_path / "b" / f"{name}{suffix}"
        if suffix == ".parquet":
            assert pq.read_table(a).equals(pq.read_table(b))
        else:
            assert a.read_text() == b.read_text()


@pytest.mark.parametrize(
    "argv",
    [
        ["--generate", "X", "--days", "0"],
        ["--generate", "X", "--step-s", "0"],
        ["--generate", "X", "--start", "yesterday"],
        ["--hosts", "0", "--duration", "1"],
    ],
)
def test_bad_input_is_a_clear_error_not_a_traceback(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [str(tmp_path / a) if a == "X" else a for a in argv]
    assert main(["simulate", *argv]) == 2
    err = capsys.readouterr().err
    assert "error:" in err and "Traceback" not in err


@pytest.mark.slow
def test_serve_prints_one_url_per_host_and_stops(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    truth = tmp_path / "truth.jsonl"
    code = main(
        ["simulate", "--hosts", "3", "--base-port", "0", "--duration", "1", "--truth", str(truth)]
    )
    assert code == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3 and all(
        line.split()[1].startswith("http://127.0.0.1:") for line in lines
    )
    # Which jobs run depends on the hour the test runs in (live mode is wall-clock): the file is
    # written, and every record in it, if any, names its job.
    assert truth.exists()
    assert all("job_id" in json.loads(line) for line in truth.read_text().splitlines())
