"""`fleetscope trace analyze` end to end through the real command line entry point."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from app.cli import main
from tests.analyzers.traces.trace_paths import DATA


def test_table_output_names_the_data_loader_stall(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["trace", "analyze", str(DATA / "kineto_resnet50_nw0")]) == 0
    out = capsys.readouterr().out
    assert "== Data-loader share of each step" in out
    assert "[T8 critical] rank 0: data-loader bound: 40% of step time" in out
    assert "differs from HTA" in out


def test_json_hta_compatible_matches_hta(capsys: pytest.CaptureFixture[str]) -> None:
    path = DATA / "hta_nccl_data_rank0"
    assert main(["trace", "analyze", str(path), "--hta-compatible", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["mode"] == "hta"
    row = data["analyses"]["temporal_breakdown"]["tables"]["temporal_breakdown"][0]
    assert row["idle_time(us)"] == 338781.0 and row["idle_time_pctg"] == 77.78
    assert data["analyses"]["comm_comp_overlap"]["tables"]["comm_comp_overlap"] == [
        {"rank": 0, "comp_comm_overlap_pctg": 14.31}
    ]


def test_several_paths_give_one_report_each(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = shutil.copy(
        DATA / "hta_amd_mi250_minitoy" / "mi250_minitoy_train_ROCm6_2_kineto.json.gz", tmp_path
    )
    paths = [str(a), str(DATA / "edge_cases" / "trace_file_list_inference_rank_1")]
    assert main(["trace", "analyze", *paths, "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [d["ranks"] for d in data] == [[0], [1]]


def test_analyses_runs_only_the_named_ones_and_judges_nothing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = str(DATA / "hta_nccl_data_rank0")
    argv = ["trace", "analyze", path, "--hta-compatible", "--format", "json"]
    assert main([*argv, "--analyses", "comm_comp_overlap,temporal_breakdown"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert list(data["analyses"]) == ["temporal_breakdown", "comm_comp_overlap"]  # report order
    assert data["analyses"]["comm_comp_overlap"]["tables"]["comm_comp_overlap"] == [
        {"rank": 0, "comp_comm_overlap_pctg": 14.31}
    ]
    assert data["findings"] is None
    assert main(["trace", "analyze", path, "--analyses", "temporal_breakdown"]) == 0
    assert "== Findings: not judged (only some analyses ran" in capsys.readouterr().out


def test_an_unknown_analysis_is_refused_with_the_known_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "never-read"  # names are checked before any file is read
    assert main(["trace", "analyze", str(missing), "--analyses", "temporal,idle_time"]) == 4
    err = capsys.readouterr().err
    assert "unknown trace analyses ['temporal']; known: ['aten_op_kernels'," in err
    assert main(["trace", "analyze", str(missing), "--analyses", "idle_time,"]) == 2
    assert "--analyses takes names separated by commas, got 'idle_time,'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda d: d / "missing", "no such file or folder"),
        (lambda d: d, "no trace files"),
        (lambda d: (d / "t.json").write_text('{"traceEvents": [') and d / "t.json", "truncated"),
    ],
)
def test_bad_input_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], make: object, message: str
) -> None:
    path = make(tmp_path)  # type: ignore[operator]
    assert main(["trace", "analyze", str(path)]) == 4
    err = capsys.readouterr().err
    assert err.startswith("fleetscope: error: ") and message in err
    assert "Traceback" not in err


def test_two_files_of_one_rank_are_refused_natively(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("a.json.gz", "b.json.gz"):
        shutil.copy(
            DATA / "hta_amd_mi250_minitoy" / "mi250_minitoy_train_ROCm6_2_kineto.json.gz",
            tmp_path / name,
        )
    assert main(["trace", "analyze", str(tmp_path)]) == 4
    assert "both claim rank 0" in capsys.readouterr().err
    assert main(["trace", "analyze", str(tmp_path), "--hta-compatible"]) == 0
    assert "HTA keeps the later file" in capsys.readouterr().out


@pytest.mark.parametrize("users", [None, "3"])
def test_the_command_leaves_the_blas_setting_as_it_found_it(
    users: str | None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """One OpenBLAS thread while numpy is first imported (issue 19), unless the user chose;
    afterwards the environment is the user's again (processes started later inherit it)."""
    if users is None:
        monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    else:
        monkeypatch.setenv("OPENBLAS_NUM_THREADS", users)
    path = DATA / "hta_amd_mi250_minitoy"
    assert main(["trace", "analyze", str(path), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["mode"] == "native"
    assert os.environ.get("OPENBLAS_NUM_THREADS") == users
