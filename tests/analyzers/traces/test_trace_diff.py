"""Trace diff agrees with HTA 0.5.0's `TraceDiff.compare_traces` and `ops_diff`, and
`fleetscope trace diff A B` prints it.

References: tests/data/traces/<control>/hta-0.5.0/trace_diff_<test>.json, written by
`bench/hta_api_goldens.py --diff` in HTA's own environment (defaults: first rank, first iteration,
CPU and GPU). Every name's counts and total durations are equal, and so are the five change lists.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from analyzers.traces.analyses.trace_diff import compare_traces, ops_diff, row_iterations
from analyzers.traces.api import load_trace_set
from app.cli import main
from tests.analyzers.traces.trace_paths import DATA, trace_set

PAIRS = [
    ("kineto_resnet50_nw0", "kineto_resnet50_nw4"),
    ("hta_trace_diff_control_rank3", "hta_ns_resolution_rank0"),
    ("hta_ns_resolution_rank0", "hta_ns_resolution_rank0"),
]


@pytest.mark.parametrize(("control", "test"), PAIRS)
def test_agrees_with_hta(control: str, test: str) -> None:
    golden = json.loads((DATA / control / "hta-0.5.0" / f"trace_diff_{test}.json").read_text())
    expected = {
        r["name"]: (
            r["Control_counts"],
            r["Control_total_duration"],
            r["Test_counts"],
            r["Test_total_duration"],
            r["counts_change_categories"],
        )
        for r in golden["compare_traces"]
    }
    table = compare_traces(
        trace_set(DATA / control, hta_compatible=True), trace_set(DATA / test, hta_compatible=True)
    )
    ours = {
        r["name"]: (
            r["control_counts"],
            r["control_total_duration"],
            r["test_counts"],
            r["test_total_duration"],
            r["counts_change_categories"],
        )
        for r in table.records()
    }
    assert ours == expected
    hta_lists = golden["ops_diff"]
    assert ops_diff(table) == {kind: sorted(names) for kind, names in hta_lists.items()}


def test_a_trace_against_itself_changes_nothing() -> None:
    trace = trace_set(DATA / "hta_ns_resolution_rank0")
    changes = ops_diff(compare_traces(trace, trace, control_iteration="all", test_iteration="all"))
    assert changes["added"] == changes["deleted"] == changes["increased"] == []
    assert changes["decreased"] == [] and len(changes["unchanged"]) == 192


def test_cli_table_shows_the_data_loader_moving_to_workers(
    capsys: pytest.CaptureFixture[str],
) -> None:
    a, b = DATA / "kineto_resnet50_nw0", DATA / "kineto_resnet50_nw4"
    assert main(["trace", "diff", str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert "added 3  deleted 15  increased 12  decreased 12  unchanged 117  (names)" in out
    assert "  deleted: enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__\n" in out
    first_row = out.split("B-A us\n", 1)[1].splitlines()[0].split()
    assert first_row == [
        "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", "1", "0", "68694", "0",
        "-68694",
    ]  # fmt: skip


def test_cli_json_lists_every_name_and_the_changes(capsys: pytest.CaptureFixture[str]) -> None:
    a, b = DATA / "kineto_resnet50_nw0", DATA / "kineto_resnet50_nw4"
    args = ["trace", "diff", str(a), str(b), "--hta-compatible", "--device", "gpu"]
    assert main([*args, "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["columns"][:2] == ["name", "control_counts"]
    names = {row[0] for row in data["rows"]}
    assert "cudaLaunchKernel" not in names  # a CPU row
    assert data["ops_diff"]["added"] == [
        "volta_scudnn_128x32_sliced1x4_ldg4_relu_exp_small_nhwc_tn_v1"
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["/no/such/trace", str(DATA / "kineto_resnet50_nw4")], "/no/such/trace: no such file"),
        (
            [str(DATA / "tracelens_b200_eager"), str(DATA / "kineto_resnet50_nw4")],
            "no ProfilerStep iterations to compare (compare the whole traces with --iteration all)",
        ),
        (
            [str(DATA / "kineto_resnet50_nw0"), str(DATA / "kineto_resnet50_nw4"), "--rank-b", "3"],
            "no rank 3 (ranks: [0])",
        ),
        (
            [str(DATA / "kineto_resnet50_nw0"), str(DATA / "kineto_resnet50_nw4"),
             "--iteration-a", "x"],
            "--iteration must be a ProfilerStep number or 'all', got 'x'",
        ),
    ],
)  # fmt: skip
def test_cli_bad_input_is_a_clear_error(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["trace", "diff", *args]) != 0
    captured = capsys.readouterr()
    assert captured.out == ""
    assert message in captured.err


def test_cli_compares_two_whole_traces_without_steps(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    b200 = str(DATA / "tracelens_b200_eager")
    args = ["--iteration-a", "all", "--iteration-b", "all", "--format", "json"]
    assert main(["trace", "diff", b200, b200, *args]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["ops_diff"]["added"] == [] and data["ops_diff"]["unchanged"]


def test_a_row_without_a_name_is_in_no_step_whatever_the_last_symbol(tmp_path: Path) -> None:
    # The step number of a row's name was read at its symbol; a nameless row's symbol is -1,
    # which read the last symbol's, here ProfilerStep#5's: the row became a step of its own.
    op = {"ph": "X", "cat": "cpu_op", "pid": 1, "tid": 1}
    events = [
        {**op, "name": "aten::mm", "ts": 0, "dur": 10},
        {**op, "ts": 20, "dur": 5},
        {**op, "name": "aten::add", "ts": 21, "dur": 1},
        {**op, "name": "ProfilerStep#5", "ts": 100, "dur": 50},
        {**op, "name": "aten::mm", "ts": 110, "dur": 10},
    ]
    (tmp_path / "t.json").write_text(json.dumps({"traceEvents": events}))
    frame = load_trace_set(tmp_path / "t.json").ranks[0]
    assert frame.names[-1] == "ProfilerStep#5"
    by_ts = dict(zip(frame.ts.tolist(), row_iterations(frame).tolist(), strict=True))
    assert by_ts == {0.0: -1, 20.0: -1, 21.0: -1, 100.0: 5, 110.0: 5}
