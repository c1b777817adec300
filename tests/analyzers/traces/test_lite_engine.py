"""The small-trace engine (analyzers/traces/engine.py on listnp) prints exactly what the numpy
engine prints, never imports numpy, and where it cannot answer exactly the command answers on
numpy instead (issue 19)."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from analyzers.traces import engine, listnp
from analyzers.traces.engine import TieOrderMatters, each_tie_order, engine_for, text_bytes
from analyzers.traces.standby import SWITCH as STANDBY_SWITCH
from analyzers.traces.xp import ENV
from bench.trace_slices import read_trace, write_window
from tests.analyzers.traces.trace_paths import DATA, EDGE_TRACES, MAIN_TRACES

ROOT = Path(__file__).resolve().parents[3]
MINITOY = DATA / "hta_amd_mi250_minitoy"
# Windows of every real trace (start as a fraction of its events, events): a short capture's
# start, middle and end, cut anywhere.
WINDOWS = ((0.0, 250), (0.5, 250), (0.3, 900), (0.97, 600))
FORMATS = (("--format", "json"), ("--format", "table"))
MODES = ((), ("--hta-compatible",))


@pytest.fixture(scope="module")
def small_traces(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    folder = tmp_path_factory.mktemp("windows")
    traces = [MINITOY, *EDGE_TRACES]
    for trace in MAIN_TRACES:
        if trace == MINITOY:
            continue
        (file,) = sorted(p for p in trace.iterdir() if p.name.endswith((".json", ".gz")))
        document = read_trace(file)
        n = len(document["traceEvents"])
        for fraction, events in WINDOWS:
            start = int(n * fraction)
            out = folder / f"{trace.name}-{start}-{events}" / "trace.json"
            traces.append(write_window(document, start, events, out).parent)
    return traces


def _run_engine(engine_name: str, cases: list[list[str]], tmp: Path) -> dict[str, object]:
    cases_file = tmp / f"cases-{engine_name}.json"
    out_file = tmp / f"out-{engine_name}.json"
    cases_file.write_text(json.dumps(cases))
    subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.analyzers.traces.engine_runner",
            engine_name,
            cases_file,
            out_file,
        ],
        cwd=ROOT,
        check=True,
        env={k: v for k, v in os.environ.items() if k != ENV},
    )
    result: dict[str, object] = json.loads(out_file.read_text())
    return result


@pytest.fixture(scope="module")
def both_engines(
    small_traces: list[Path], tmp_path_factory: pytest.TempPathFactory
) -> tuple[dict[str, object], dict[str, object]]:
    tmp = tmp_path_factory.mktemp("engines")
    cases = [
        ["trace", "analyze", str(t), *mode, *fmt]
        for t in small_traces
        for mode in MODES
        for fmt in FORMATS
    ]
    return _run_engine("numpy", cases, tmp), _run_engine("lite", cases, tmp)


def test_every_small_trace_prints_the_same_on_both_engines(
    both_engines: tuple[dict[str, object], dict[str, object]],
) -> None:
    numpy_runs, lite_runs = both_engines
    assert numpy_runs["engine"] == "numpy" and lite_runs["engine"] == "lite"
    mismatched = []
    for ref, lite in zip(numpy_runs["runs"], lite_runs["runs"], strict=True):  # type: ignore[call-overload]
        assert "raised" not in ref, ref
        if lite.get("not_implemented"):
            continue  # the whole command re-runs on numpy (test below)
        if (lite.get("raised"), lite.get("code"), lite["stdout"], lite["stderr"]) != (
            None,
            ref["code"],
            ref["stdout"],
            ref["stderr"],
        ):
            mismatched.append((" ".join(ref["argv"][2:]), lite.get("raised")))
    assert mismatched == []


def test_the_lite_engine_answers_small_traces_itself_without_numpy(
    both_engines: tuple[dict[str, object], dict[str, object]],
) -> None:
    _, lite_runs = both_engines
    assert lite_runs["numpy_loaded"] is False
    runs = lite_runs["runs"]
    assert isinstance(runs, list)
    minitoy = [r for r in runs if r["argv"][2] == str(MINITOY)]
    assert len(minitoy) == 4 and not any(r.get("raised") for r in minitoy)
    answered = [r for r in runs if not r.get("raised")]
    # Most windows answer on listnp; the rest re-run on numpy (ties whose order changes a
    # number, a numpy feature listnp does not reproduce). The fallbacks are printed on failure.
    assert len(answered) >= 0.75 * len(runs), [
        (r["argv"][2:], r["raised"]) for r in runs if r.get("raised")
    ]


def _fleetscope(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The console script as a user runs it: the whole process, so a fallback re-executes."""
    script = Path(sys.executable).with_name("fleetscope")
    return subprocess.run(
        [str(script), *args], capture_output=True, text=True, env=env, cwd=ROOT, check=False
    )


STANDBY = pytest.mark.parametrize(
    "standby", ["0", "1"], ids=["re-executes-on-numpy", "numpy-standby-takes-over"]
)


@STANDBY
@pytest.mark.parametrize(
    "trace",
    [MINITOY, DATA / "edge_cases" / "critical_path_simple_add"],
    ids=["answered-on-lite", "ties-matter-so-numpy-answers"],
)
def test_the_whole_command_prints_numpys_output_either_way(trace: Path, standby: str) -> None:
    base = {k: v for k, v in os.environ.items() if k != ENV}
    args = ("trace", "analyze", str(trace), "--hta-compatible", "--format", "json")
    on_numpy = _fleetscope(*args, env={**base, ENV: "numpy"})
    by_size = _fleetscope(*args, env={**base, STANDBY_SWITCH: standby})
    assert on_numpy.returncode == 0
    assert (by_size.returncode, by_size.stdout, by_size.stderr) == (
        0,
        on_numpy.stdout,
        on_numpy.stderr,
    )


@STANDBY
def test_a_corrupt_small_trace_gets_the_numpy_runs_error_once(tmp_path: Path, standby: str) -> None:
    bad = tmp_path / "t.json"
    bad.write_text('{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": ')
    base = {k: v for k, v in os.environ.items() if k != ENV}
    on_numpy = _fleetscope("trace", "analyze", str(bad), env={**base, ENV: "numpy"})
    by_size = _fleetscope("trace", "analyze", str(bad), env={**base, STANDBY_SWITCH: standby})
    assert on_numpy.returncode == 4 and "truncated" in on_numpy.stderr
    assert (by_size.returncode, by_size.stdout, by_size.stderr) == (
        4,
        "",
        on_numpy.stderr,
    )


# --- which engine, by size ---------------------------------------------------------------------


def test_text_bytes_reads_gzip_trailers_plain_sizes_and_folders(tmp_path: Path) -> None:
    text = b'{"traceEvents": []}' * 1000
    (tmp_path / "a.json.gz").write_bytes(gzip.compress(text))
    (tmp_path / "b.json").write_bytes(text)
    (tmp_path / "notes.txt").write_bytes(b"x" * 10**6)  # not a trace file of the folder
    assert text_bytes([tmp_path / "b.json"]) == len(text)
    assert text_bytes([tmp_path / "a.json.gz"]) == len(text)
    assert text_bytes([tmp_path]) == 2 * len(text)
    assert text_bytes([tmp_path / "missing.json"]) is None


def test_small_traces_go_lite_large_ones_and_numpy_processes_stay_on_numpy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    small = tmp_path / "small.json"
    small.write_bytes(b" " * engine.LITE_MAX_TEXT_BYTES)
    large = tmp_path / "large.json"
    large.write_bytes(b" " * (engine.LITE_MAX_TEXT_BYTES + 1))
    assert "numpy" in sys.modules  # this test process: numpy is paid for
    assert engine_for([small]) == "numpy"
    monkeypatch.delitem(sys.modules, "numpy")
    assert engine_for([small]) == "lite"
    assert engine_for([small, small]) == "numpy"  # the traces of one command together
    assert engine_for([large]) == "numpy"
    assert engine_for([tmp_path / "missing"]) == "numpy"  # numpy's run says what is wrong


def test_a_command_called_in_process_stays_on_numpy_unless_asked(tmp_path: Path) -> None:
    """`main([...])` is not the whole process: it cannot re-run itself, so it never picks lite."""
    code = (
        "import contextlib, io, sys\n"
        "from app.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    assert main(['trace', 'analyze', {str(MINITOY)!r}]) == 0\n"
        "from analyzers.traces import xp\n"
        "print(xp.bound())"
    )
    env = {k: v for k, v in os.environ.items() if k != ENV}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT, check=True
    )
    assert out.stdout.split() == ["numpy"]
    env[ENV] = "lite"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT, check=True
    )
    assert out.stdout.split() == ["lite"]


# --- ties ------------------------------------------------------------------------------------


def _sorted_by_key(keys: list[float], payload: list[str]) -> list[str]:
    order = listnp.argsort(listnp.array(keys)).tolist()
    return [payload[i] for i in order]


def test_a_result_that_no_tie_order_changes_stands() -> None:
    runs = []

    def run() -> list[float]:
        runs.append(1)
        keys = [2.0, 1.0, 1.0, 3.0, 3.0]
        return [keys[i] for i in listnp.argsort(listnp.array(keys)).tolist()]

    assert each_tie_order(run) == [1.0, 1.0, 2.0, 3.0, 3.0]
    assert len(runs) == 4  # 2! x 2! orders of the two tie groups, each tried


def test_a_result_that_a_tie_order_changes_is_left_to_numpy() -> None:
    with pytest.raises(TieOrderMatters, match="depends on the order"):
        each_tie_order(lambda: _sorted_by_key([1.0, 1.0, 0.0], ["a", "b", "c"]))


def test_without_ties_the_analysis_runs_once_and_too_many_orders_are_refused() -> None:
    runs = []

    def run() -> list[str]:
        runs.append(1)
        return _sorted_by_key([3.0, 1.0, 2.0], ["a", "b", "c"])

    assert each_tie_order(run) == ["b", "c", "a"] and len(runs) == 1
    with pytest.raises(TieOrderMatters, match="more than 64 orders"):
        each_tie_order(lambda: _sorted_by_key([1.0] * 5, list("abcde")))  # 5! = 120


def test_tie_orders_of_later_sorts_are_walked_for_each_choice_of_earlier_ones() -> None:
    seen = set()

    def run() -> int:
        first = tuple(listnp.argsort(listnp.array([1.0, 1.0])).tolist())
        second = tuple(listnp.argsort(listnp.array([5.0, 5.0, 5.0])).tolist())
        seen.add((first, second))
        return 0

    each_tie_order(run)
    assert len(seen) == 2 * 6


def test_outside_an_analysis_a_tie_raises_for_numpy_to_decide() -> None:
    with pytest.raises(NotImplementedError):
        listnp.argsort(listnp.array([1.0, 1.0]))
