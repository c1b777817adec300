"""`fleetscope trace analyze` refuses hostile or unreadable input at once, with one line on stderr
and an exit code of its own for each kind (issue 28): real files through the console script."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from fleetscope.errors import (
    NonFiniteTraceError,
    NotRegularFileError,
    TraceBudgetError,
    TraceError,
    TraceNestingError,
)

FLEETSCOPE = Path(sys.executable).parent / "fleetscope"
_KERNEL = b'{"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, '


def _gzip_bomb(folder: Path) -> Path:
    """2 GiB of spaces after `{"traceEvents": [` in 2.1 MB of gzip (one member a MiB, which every
    gzip reader inflates as one stream)."""
    block = gzip.compress(b" " * (1 << 20), compresslevel=9, mtime=0)
    path = folder / "bomb.json.gz"
    with path.open("wb") as f:
        f.write(gzip.compress(b'{"traceEvents": [', mtime=0))
        for _ in range(2048):
            f.write(block)
        f.write(gzip.compress(b"]}", mtime=0))
    assert path.stat().st_size < 2_200_000
    return path


def _nested(folder: Path) -> Path:
    path = folder / "nested.json"
    deep = b"[" * 100_000 + b"]" * 100_000
    path.write_bytes(
        b'{"traceEvents": [' + _KERNEL + b'"ts": 1, "dur": 2, "args": ' + deep + b"}]}"
    )
    return path


def _with_time(ts: bytes, dur: bytes) -> Callable[[Path], Path]:
    def make(folder: Path) -> Path:
        path = folder / "times.json"
        ok = _KERNEL + b'"ts": 1, "dur": 2}'
        bad = _KERNEL.replace(b"gemm", b"nccl") + b'"ts": ' + ts + b', "dur": ' + dur + b"}"
        path.write_bytes(b'{"traceEvents": [' + ok + b", " + bad + b"]}")
        return path

    return make


def _fifo(folder: Path) -> Path:
    path = folder / "pipe.json"
    os.mkfifo(path)  # no writer ever comes: opening it would block forever
    return path


CASES = [
    ("gzip bomb", _gzip_bomb, TraceBudgetError, "inflates past"),
    ("100,000-level nesting", _nested, TraceNestingError, "traceEvents[0] nests deeper"),
    ("NaN ts", _with_time(b"NaN", b"2"), NonFiniteTraceError, "traceEvents[1] ('nccl') has ts"),
    ("Infinity dur", _with_time(b"5", b"Infinity"), NonFiniteTraceError, "has dur = inf"),
    ("dur past float", _with_time(b"5", b"1e999"), NonFiniteTraceError, "has dur = inf"),
    ("a FIFO", _fifo, NotRegularFileError, "a FIFO, not a regular file"),
    ("/dev/zero", lambda _: Path("/dev/zero"), NotRegularFileError, "a character device"),
    ("a missing file", lambda d: d / "missing.json", TraceError, "no such file or folder"),
]


@pytest.mark.parametrize(
    ("make", "error", "message"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_hostile_input_is_one_line_and_its_own_exit_code(
    tmp_path: Path, make: Callable[[Path], Path], error: type[TraceError], message: str
) -> None:
    path = make(tmp_path)
    # The deadline is a hang guard for a busy machine, not a timing: a FIFO used to block forever.
    done = subprocess.run(
        [str(FLEETSCOPE), "trace", "analyze", str(path)], capture_output=True, timeout=300
    )
    err = done.stderr.decode()
    assert done.returncode == error.exit_code, err
    assert done.stdout == b""
    assert err.count("\n") == 1 and err.startswith(f"fleetscope: error: {path}: "), err
    assert message in err and "Traceback" not in err


def test_every_refusal_has_an_exit_code_of_its_own() -> None:
    kinds = [TraceError, TraceBudgetError, TraceNestingError, NonFiniteTraceError]
    codes = [k.exit_code for k in [*kinds, NotRegularFileError]]
    assert len(set(codes)) == len(codes)


def test_a_fifo_inside_a_folder_of_ranks_is_not_a_rank(tmp_path: Path) -> None:
    """HTA's discovery takes the folder's regular `*.json`/`*.gz` files; a FIFO among them is
    passed over, never opened."""
    _with_time(b"1", b"2")(tmp_path)
    os.mkfifo(tmp_path / "rank-1.json")
    done = subprocess.run(
        [str(FLEETSCOPE), "trace", "analyze", str(tmp_path), "--format", "json"],
        capture_output=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr.decode()
    assert b'"ranks": [\n  0\n ]' in done.stdout
