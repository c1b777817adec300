"""Trace files loaded in forked children while `fleetscope trace analyze` imports (prefetch.py):
the same columns as a load in process, today's errors for files a child cannot load, no child
left behind, and the old path when the switch is off."""

from __future__ import annotations

import dataclasses
import gc
import gzip
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from analyzers.traces import load_fast, prefetch
from analyzers.traces.load import RawTrace, load_raw_trace
from analyzers.traces.prefetch import SWITCH, Prefetch, prefetch_traces
from fleetscope.errors import TraceError
from tests.analyzers.traces.trace_paths import ALL_TRACES, DATA

ROOT = Path(__file__).resolve().parents[3]
TRACE_FILES = [f for d in ALL_TRACES for f in sorted(d.glob("*.gz"))]
NCCL = DATA / "hta_nccl_data_rank0"
NW0 = DATA / "kineto_resnet50_nw0" / "worker0.1623143089861.pt.trace.json.gz"

needs_fork = pytest.mark.skipif(
    sys.platform != "linux" or load_fast.COLUMNS_PATH != "c",
    reason="forked loaders need Linux (fork, memfd) and pay only with the C column pass",
)


def differences(prefetched: RawTrace, reference: RawTrace) -> list[str]:
    """Fields of two RawTraces that differ (arrays: values, NaN positions and dtype; the
    metadata also in key order, which the JSON output keeps)."""
    out = []
    for spec in dataclasses.fields(RawTrace):
        a, b = getattr(prefetched, spec.name), getattr(reference, spec.name)
        if isinstance(a, np.ndarray):
            same = a.dtype == b.dtype and np.array_equal(a, b, equal_nan=True)
        elif isinstance(a, dict):
            same = list(a.items()) == list(b.items())
        else:
            same = a == b
        if not same:
            out.append(spec.name)
    return out


def is_reaped(pid: int) -> bool:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return False


def run_command(
    *args: str, switch: str, core_free: bool | None = None
) -> subprocess.CompletedProcess[str]:
    """`fleetscope trace analyze ARGS` in a fresh process (numpy not imported yet: the case the
    prefetch is for), with `core_free` what the machine says when asked (None: the machine's
    word); its stderr's last line says how many children it forked."""
    script = (
        "import sys\n"
        "from analyzers.traces import prefetch\n"
        + ("" if core_free is None else f"prefetch.a_core_is_free = lambda: {core_free}\n")
        + "forked = []\n"
        "fork = prefetch.Prefetch._fork\n"
        "prefetch.Prefetch._fork = lambda self, files: forked.append(files) or fork(self, files)\n"
        "from app.cli import main\n"
        "code = main(sys.argv[1:])\n"
        "sys.stdout.flush()\n"
        "print(f'forked {len(forked)}', file=sys.stderr)\n"
        "sys.exit(code)\n"
    )
    env = {**os.environ, SWITCH: switch, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-c", script, "trace", "analyze", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        check=False,
    )


@needs_fork
def test_every_golden_trace_comes_back_with_the_columns_of_a_load_in_process() -> None:
    with Prefetch(TRACE_FILES) as prefetched:
        for path in TRACE_FILES:
            raw = prefetched.take(path)
            assert raw is not None, f"{path}: no child loaded it"
            assert differences(raw, load_raw_trace(path)) == [], path
            assert all(
                getattr(raw, spec.name).flags.writeable
                for spec in dataclasses.fields(RawTrace)
                if isinstance(getattr(raw, spec.name), np.ndarray)
            )


@needs_fork
def test_a_folder_of_ranks_is_dealt_out_to_one_child_a_core(tmp_path: Path) -> None:
    for rank in range(3):
        (tmp_path / f"rank{rank}.json.gz").symlink_to(NW0)
    files = sorted(tmp_path.iterdir())
    frozen = gc.get_freeze_count()
    with Prefetch(files) as prefetched:
        pids = [child.pid for child in prefetched._children]
        assert len(pids) == min(3, os.cpu_count() or 1)
        reference = load_raw_trace(NW0)
        for path in files:
            raw = prefetched.load(path)
            assert raw.path == path
            assert differences(raw, reference) == ["path"]
        assert gc.get_freeze_count() == frozen  # the collector sees everything again
    assert all(is_reaped(pid) for pid in pids)


def truncated_gzip(tmp_path: Path) -> Path:
    path = tmp_path / "truncated.json.gz"
    path.write_bytes(NW0.read_bytes()[: NW0.stat().st_size // 2])
    return path


def damaged_gzip(tmp_path: Path) -> Path:
    packed = bytearray(NW0.read_bytes())
    packed[5000:5064] = bytes(64)
    path = tmp_path / "damaged.json.gz"
    path.write_bytes(packed)
    return path


def malformed_json(tmp_path: Path) -> Path:
    path = tmp_path / "malformed.json"
    text = gzip.decompress(NW0.read_bytes())
    between = text.index(b"},", 300_000) + 2  # far into traceEvents
    path.write_bytes(text[:between] + b" oops," + text[between:])
    return path


def missing_file(tmp_path: Path) -> Path:
    return tmp_path / "absent.json.gz"


@needs_fork
@pytest.mark.parametrize("make", [truncated_gzip, damaged_gzip, malformed_json, missing_file])
def test_a_file_no_child_can_load_fails_with_todays_error(tmp_path: Path, make: object) -> None:
    path = make(tmp_path)  # type: ignore[operator]
    with pytest.raises(TraceError) as today:
        load_raw_trace(path)
    with Prefetch([path]) as prefetched:
        pid = prefetched._children[0].pid
        assert prefetched.take(path) is None
        assert is_reaped(pid)
    with Prefetch([path]) as prefetched, pytest.raises(TraceError) as prefetching:
        prefetched.load(path)
    assert type(prefetching.value) is type(today.value)
    assert str(prefetching.value) == str(today.value)


def never_finish(files: list[Path], fd: int) -> None:
    """A child's work that ends only when the child is killed."""
    while True:
        signal.pause()


@needs_fork
def test_children_not_waited_for_are_killed_and_reaped(monkeypatch: pytest.MonkeyPatch) -> None:
    """As on Ctrl-C or an error before the load: `close()` (the end of the `with`) kills them."""
    monkeypatch.setattr(prefetch, "_write_records", never_finish)
    frozen = gc.get_freeze_count()
    prefetched = Prefetch([NW0, NW0.with_name("other.json.gz")])
    pids = [child.pid for child in prefetched._children]
    assert len(pids) == min(2, os.cpu_count() or 1)
    assert gc.get_freeze_count() > frozen  # while children share its pages
    prefetched.close()
    assert all(is_reaped(pid) for pid in pids)
    assert gc.get_freeze_count() == frozen
    assert differences(prefetched.load(NW0), load_raw_trace(NW0)) == []  # in process now


def is_running(pid: int) -> bool:
    """Alive and not a zombie (an orphan's zombie waits for whoever adopts it)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


@needs_fork
def test_a_child_dies_with_its_killed_parent() -> None:
    script = (
        "import os, signal, sys\n"
        "from pathlib import Path\n"
        "from analyzers.traces import prefetch\n"
        "def never_finish(files, fd):\n"
        "    while True:\n"
        "        signal.pause()\n"
        "prefetch._write_records = never_finish\n"
        f"prefetched = prefetch.Prefetch([Path({str(NW0)!r})])\n"
        "print(prefetched._children[0].pid, flush=True)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    parent = subprocess.run(
        [sys.executable, "-c", script], env=env, cwd=ROOT, capture_output=True, text=True
    )
    assert parent.returncode == -signal.SIGKILL
    child = int(parent.stdout)
    deadline = time.monotonic() + 60
    while is_running(child) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not is_running(child)


@needs_fork
def test_a_killed_child_leaves_the_load_to_the_parent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(prefetch, "_write_records", never_finish)
    with Prefetch([NW0]) as prefetched:
        pid = prefetched._children[0].pid
        os.kill(pid, signal.SIGKILL)
        assert prefetched.take(NW0) is None
        assert is_reaped(pid)
        assert differences(prefetched.load(NW0), load_raw_trace(NW0)) == []


def test_where_numpy_is_imported_already_nothing_is_forked() -> None:
    """This process has numpy, as a server or a notebook would: there is nothing to overlap."""
    with prefetch_traces([NCCL]) as prefetched:
        assert prefetched._children == []


def test_without_msgspec_nothing_is_forked() -> None:
    """The stdlib path is all there is then: nothing a child could do faster."""
    script = (
        "import sys\n"
        "sys.modules['msgspec'] = None\n"
        "from analyzers.traces.prefetch import prefetch_traces\n"
        f"assert prefetch_traces([{str(NCCL)!r}])._children == []\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-c", script], env=env, cwd=ROOT, check=True)


@needs_fork
def test_the_command_loads_in_a_child_and_prints_what_it_printed_before() -> None:
    args = ("--hta-compatible", str(NCCL), "--format", "json")
    on, off = run_command(*args, switch="1"), run_command(*args, switch="0")
    assert (on.returncode, off.returncode) == (0, 0), on.stderr + off.stderr
    assert on.stderr.splitlines()[-1] == "forked 1"
    assert off.stderr.splitlines()[-1] == "forked 0"
    assert on.stdout == off.stdout


@needs_fork
def test_by_default_a_child_is_forked_only_whena_core_is_free() -> None:
    """Without a free core the child would only take CPU from the command; =1 forks anyway."""
    args = ("--hta-compatible", str(NCCL), "--format", "json")
    assert run_command(*args, switch="", core_free=True).stderr.splitlines()[-1] == "forked 1"
    assert run_command(*args, switch="", core_free=False).stderr.splitlines()[-1] == "forked 0"
    assert run_command(*args, switch="1", core_free=False).stderr.splitlines()[-1] == "forked 1"


@needs_fork
def test_a_small_trace_is_loaded_in_process() -> None:
    """Its load takes less than the fork would cost the command (MIN_TEXT_BYTES)."""
    small = DATA / "hta_amd_mi250_minitoy"
    run = run_command("--hta-compatible", str(small), "--format", "json", switch="1")
    assert run.returncode == 0 and run.stderr.splitlines()[-1] == "forked 0"


@needs_fork
def test_the_command_still_names_a_broken_file(tmp_path: Path) -> None:
    path = truncated_gzip(tmp_path)
    on, off = run_command(str(path), switch="1"), run_command(str(path), switch="0")
    assert on.stderr.splitlines()[-1] == "forked 1"
    assert (on.returncode, on.stdout) == (off.returncode, off.stdout)
    assert on.stderr.splitlines()[:-1] == off.stderr.splitlines()[:-1]
    assert "truncated.json.gz" in off.stderr and off.returncode != 0


@needs_fork
def test_the_child_reads_a_c_pass_file_without_numpy(tmp_path: Path) -> None:
    """Importing numpy (~70-130 ms) in the child would cost it what the prefetch gains."""
    report = tmp_path / "child-modules"
    script = (
        "import sys\n"
        "from pathlib import Path\n"
        "from analyzers.traces import prefetch\n"
        "write = prefetch._write_records\n"
        "def spy(files, fd):\n"
        "    write(files, fd)\n"
        f"    Path({str(report)!r}).write_text(str('numpy' in sys.modules))\n"
        "prefetch._write_records = spy\n"
        f"prefetched = prefetch.Prefetch([Path({str(NW0)!r})])\n"
        f"assert prefetched.take(Path({str(NW0)!r})) is not None\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-c", script], env=env, cwd=ROOT, check=True)
    assert report.read_text() == "False"


@needs_fork
def test_where_a_child_loaded_the_command_imports_no_msgspec() -> None:
    """The child imports the fast loader (msgspec, zlib-ng); the command itself, which only maps
    what the child wrote and prints the JSON with the stdlib, never does (issue 19: ~8 ms)."""
    script = (
        "import sys\n"
        "from app.cli import main\n"
        "code = main(sys.argv[1:])\n"
        "sys.stdout.flush()\n"
        "heavy = ('msgspec', 'zlib_ng', 'analyzers.traces.load_fast', 'signal')\n"
        "print(sorted(m for m in heavy if m in sys.modules), file=sys.stderr)\n"
        "sys.exit(code)\n"
    )
    env = {**os.environ, SWITCH: "1", "PYTHONPATH": str(ROOT)}
    args = ("trace", "analyze", "--hta-compatible", str(NCCL), "--format", "json")
    run = subprocess.run(
        [sys.executable, "-c", script, *args], capture_output=True, text=True, env=env, cwd=ROOT
    )
    assert run.returncode == 0, run.stderr
    assert run.stderr.splitlines()[-1] == "[]"
    assert run.stdout == run_command(*args[2:], switch="0").stdout
