"""Loads the trace files of `fleetscope trace analyze` in forked children while the command
imports numpy and the analyses (issue 19).

Why: the command spends ~100-130 ms importing numpy, msgspec and the analyses before it can read
a byte of the trace, and then 20-90 ms loading it (inflate, the C column pass). Both hold the
GIL, so a thread cannot overlap them (RESULTS.md: inflating in a second thread lost time, a GIL
hand-over every chunk). A child forked before numpy is imported (a small, single-threaded
process: the fork is cheap and safe) loads the files on the other core with the same fast
loader (load_fast.py, which needs numpy only for a batch the C pass leaves to msgspec) and
writes the columns' bytes to a memfd; the parent, its imports done, maps that memfd and reads
the columns from it without a copy. Why a memfd and not a pipe: a pipe holds 64 KiB, so the
child would stall until the parent read it, after the imports the child was meant to overlap.

What it must never change: a file a child does not load (the fast path's fallback, a corrupt or
truncated file, an exception, a crashed or killed child) is loaded by the parent exactly as
without a prefetch (`load.load_raw_trace`), so columns, outputs and errors are the same. Every
child is waited for; `close()` (the `with` block's end, also on Ctrl-C or an error) kills and
reaps those not waited for yet.

Off with FLEETSCOPE_TRACE_PREFETCH=0, and wherever it cannot pay: no fork or memfd (macOS,
Windows), numpy already imported (nothing left to overlap: a server, a test process), threads
running (a fork copies one thread of a locked world), less than ~10 ms of load (MIN_TEXT_BYTES),
or no core free when the command starts: the child would only take CPU from this process (the
fork costs ~10-20 ms of CPU in all, which an idle core hides). FLEETSCOPE_TRACE_PREFETCH=1
forks whether a core is free or not (tests, benchmarks).
"""

from __future__ import annotations

import contextlib
import gc
import marshal
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    from types import TracebackType

    from analyzers.traces.load import RawTrace

__all__ = ["MIN_TEXT_BYTES", "SWITCH", "Prefetch", "a_core_is_free", "die_with", "prefetch_traces"]

SWITCH = "FLEETSCOPE_TRACE_PREFETCH"
# api.TRACE_SUFFIXES (api imports numpy): which files of a folder `find_trace_files` returns.
_TRACE_SUFFIXES = (".json", ".gz")
# Below this much JSON text in all (~10 ms of load) a fork costs about what it saves: the fork,
# the copy-on-write faults of the parent's imports after it and the child's own (3-9 ms of the
# parent's CPU, nccl_data; the child takes ~10 ms more CPU than the same load in process).
MIN_TEXT_BYTES = 4 << 20
# A gzip file's text, estimated from its size: these traces inflate 8-30x; the low end, so that a
# file counted in is worth it.
_GZIP_RATIO = 10
_FOOTER_BYTES = 8  # where the records start, after the columns: little-endian uint64
_ALIGN = 64  # every column starts at a multiple of this, as numpy's own allocations do
_PR_SET_PDEATHSIG = 1  # linux/prctl.h
# signal.SIGKILL on Linux, the only system that forks a child here (`signal` builds its enums at
# import, ~0.6 ms of either process).
_SIGKILL = 9

# One loaded file, as the child writes it and the parent reads it back: the fields of RawTrace
# that are not columns, then each column's (offset, bytes) in the memfd, in columns.DTYPES order.
_Record = tuple[
    str, dict[str, Any], list[str], "int | None", bool, bool, int, list[tuple[int, int]]
]


def prefetch_traces(paths: Sequence[str | Path]) -> Prefetch:
    """Start loading the trace files of `paths` (files, or folders of ranks) in children, where
    that can pay (module docstring); a Prefetch that loads in process otherwise."""
    if not _worth_forking():
        return Prefetch([])
    files = [file for path in paths for file in _trace_files(Path(path))]
    if _text_bytes(files) < MIN_TEXT_BYTES:
        return Prefetch([])
    # The child imports the fast loader (load_fast.py: msgspec, zlib-ng) after the fork, while
    # this process imports numpy: this one never needs them (~8 ms, issue 19). Without msgspec
    # there is only the stdlib path, in process.
    if not _installed("msgspec"):
        return Prefetch([])
    _import_shared()
    return Prefetch(files)


# What both processes import after the fork: the child for msgspec and its own death signal
# (ctypes), this one for numpy and the dataclasses. Imported once, before the fork, it costs this
# process nothing more and spares the child ~12 ms of CPU, so the child still finishes when it
# did while this process imported msgspec for it (where the child is the critical path: a large
# trace, a busy machine).
_SHARED = ("ctypes", "datetime", "inspect", "numbers", "platform", "struct", "textwrap")


def _import_shared() -> None:
    import importlib

    for name in _SHARED:
        with contextlib.suppress(ImportError):  # ctypes is optional in a CPython build
            importlib.import_module(name)


def _installed(name: str) -> bool:
    """Whether `import name` would find a module: `importlib.util.find_spec(name) is not None`,
    without importing importlib.util (~0.4 ms)."""
    if name in sys.modules:
        return sys.modules[name] is not None
    return any(
        finder.find_spec(name, None) is not None
        for finder in sys.meta_path
        if hasattr(finder, "find_spec")
    )


def _worth_forking() -> bool:
    switch = os.environ.get(SWITCH, "").strip().lower()
    if switch in ("0", "false", "no", "off"):
        return False
    if sys.platform != "linux" or not hasattr(os, "fork") or not hasattr(os, "memfd_create"):
        return False
    if "numpy" in sys.modules:
        return False
    threading = sys.modules.get("threading")
    if threading is not None and threading.active_count() > 1:
        return False
    return switch in ("1", "true", "yes", "on") or a_core_is_free()


def a_core_is_free() -> bool:
    """Fewer tasks running right now than cores (this one included): the kernel's count in
    /proc/loadavg, `running/total`, a sample of this instant (not the minute's average)."""
    try:
        with open("/proc/loadavg", "rb") as loadavg:
            running = int(loadavg.read().split()[3].split(b"/")[0])
    except (OSError, ValueError, IndexError):
        return True
    return running < (os.cpu_count() or 1)


def _trace_files(path: Path) -> list[Path]:
    """The files `api.find_trace_files(path)` will return (the same rule, and paths built the
    same way, so they compare equal); none where it will raise (the parent then raises)."""
    try:
        if path.is_file():
            return [path]
        if path.is_dir():
            return sorted(
                p for p in path.iterdir() if p.is_file() and p.name.endswith(_TRACE_SUFFIXES)
            )
    except OSError:
        pass
    return []


def _text_bytes(files: list[Path]) -> int:
    """About how much JSON text the files hold (gzip told by the name: a guess is enough)."""
    total = 0
    for file in files:
        with contextlib.suppress(OSError):  # the parent's load says what is wrong with it
            size = file.stat().st_size
            total += size * _GZIP_RATIO if file.name.endswith(".gz") else size
    return total


class _Child:
    """One forked loader, its memfd, and what it loaded once it has been waited for."""

    def __init__(self, pid: int, fd: int) -> None:
        self.pid = pid
        self.fd = fd
        self.records: dict[Path, RawTrace] | None = None  # None: not waited for yet


class Prefetch:
    """Trace files being loaded in forked children (one a core at most, the files dealt out in
    turn); `load(path)` hands over a child's columns, or loads the file in process."""

    def __init__(self, files: Sequence[Path]) -> None:
        self._children: list[_Child] = []
        self._owner: dict[Path, _Child] = {}
        workers = min(len(files), os.cpu_count() or 1)
        # Out of the collector's sight while children live: a collection writes to every object
        # it looks at, and each page written while a child shares it is copied (~5 ms of the
        # parent's CPU, and its faults, a tenth fewer; measured on nccl_data).
        self._frozen = workers > 0
        if self._frozen:
            gc.freeze()
        try:
            for worker in range(workers):
                share = list(files[worker::workers])
                child = self._fork(share)
                self._owner.update((path, child) for path in share)
        except BaseException:
            self.close()
            raise

    def _fork(self, files: list[Path]) -> _Child:
        fd = os.memfd_create("fleetscope-trace-prefetch", os.MFD_CLOEXEC)
        parent = os.getpid()
        try:
            pid = os.fork()
        except BaseException:
            os.close(fd)
            raise
        if pid == 0:
            _child_main(files, fd, parent)
        child = _Child(pid, fd)
        self._children.append(child)
        return child

    def take(self, path: str | Path) -> RawTrace | None:
        """The file's columns as a child loaded them (waiting for it), or None where no child
        did: then the caller loads the file itself."""
        path = Path(path)
        child = self._owner.pop(path, None)
        if child is None:
            return None
        if child.records is None:
            child.records = _collect(child)
            self._thaw_once_reaped()
        return child.records.pop(path, None)

    def load(self, path: str | Path) -> RawTrace:
        """`load.load_raw_trace(path)`, by a child where one loaded it."""
        raw = self.take(path)
        if raw is not None:
            return raw
        from analyzers.traces.load import load_raw_trace

        return load_raw_trace(path)

    def close(self) -> None:
        """Kill and reap every child not waited for yet; close the memfds."""
        for child in self._children:
            if child.records is None:
                child.records = {}
                with contextlib.suppress(ProcessLookupError):  # ours until reaped: never raised
                    os.kill(child.pid, _SIGKILL)
                _reap(child.pid)
            if child.fd >= 0:
                os.close(child.fd)
                child.fd = -1
        self._owner.clear()
        self._thaw_once_reaped()

    def _thaw_once_reaped(self) -> None:
        if self._frozen and all(child.records is not None for child in self._children):
            gc.unfreeze()
            self._frozen = False

    def __enter__(self) -> Prefetch:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _reap(pid: int) -> int:
    """Wait for the child; its exit code (negative: the signal that ended it)."""
    while True:
        try:
            _, status = os.waitpid(pid, 0)
        except ChildProcessError:  # pragma: no cover - reaped by someone else
            return -1
        if os.WIFEXITED(status) or os.WIFSIGNALED(status):
            return os.waitstatus_to_exitcode(status)


def _collect(child: _Child) -> dict[Path, RawTrace]:
    """Wait for the child and read back what it loaded ({} if it did not end well)."""
    child.records = {}  # reaped below, whatever happens: close() must not wait for it again
    if _reap(child.pid) != 0:
        return {}
    try:
        return _read_records(child.fd)
    except (OSError, ValueError, EOFError, TypeError, IndexError):
        return {}
    finally:
        os.close(child.fd)
        child.fd = -1


def _read_records(fd: int) -> dict[Path, RawTrace]:
    import mmap

    from analyzers.traces.columns import DTYPES
    from analyzers.traces.load import raw_trace
    from analyzers.traces.xp import np

    size = os.fstat(fd).st_size
    # Shared, not private: the child is gone, so the pages are this process's alone, and a
    # private writable mapping would copy every page when populated.
    flags = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)
    view = mmap.mmap(fd, size, flags=flags, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    records_at = int.from_bytes(view[size - _FOOTER_BYTES :], "little")
    records: list[_Record | None] = marshal.loads(view[records_at : size - _FOOTER_BYTES])
    loaded: dict[Path, RawTrace] = {}
    for record in records:
        if record is None:
            continue
        path, metadata, names, hta_rank, ts_has_float, ts_all_present, count, spans = record
        columns = {
            key: np.frombuffer(
                view, dtype=dtype, count=nbytes // np.dtype(dtype).itemsize, offset=at
            )
            if nbytes
            else np.zeros(0, dtype=dtype)
            for (key, dtype), (at, nbytes) in zip(DTYPES.items(), spans, strict=True)
        }
        loaded[Path(path)] = raw_trace(
            Path(path),
            metadata,
            names,
            columns,
            ts_has_float=ts_has_float,
            ts_all_present=ts_all_present,
            event_count=count,
            hta_rank=hta_rank,
            symbols={name: symbol for symbol, name in enumerate(names)},
        )
    return loaded


def _child_main(files: list[Path], fd: int, parent: int) -> NoReturn:
    """The child: load, write, and leave without running anything of the parent's (atexit,
    buffered output); exit code 0 only when the records are whole."""
    code = 1
    try:
        die_with(parent)
        _write_records(files, fd)
        code = 0
    except BaseException:  # any failure (Ctrl-C too): the parent loads the files itself
        pass
    finally:
        os._exit(code)


def die_with(parent: int) -> None:
    """Have the kernel kill this child when its parent dies (killed, say, where `close()` never
    runs): nobody would read what it writes. Where that cannot be asked, it ends with its load."""
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, _SIGKILL)
    except (OSError, AttributeError):  # pragma: no cover - a libc without prctl
        return
    if os.getppid() != parent:  # it died before the request was in place
        os._exit(1)


def _write_records(files: list[Path], fd: int) -> None:
    from analyzers.traces.load_fast import decode_fast
    from analyzers.traces.trace_text import CHUNK_SIZE

    records: list[_Record | None] = []
    with open(fd, "wb", closefd=False) as out:
        for path in files:
            try:
                records.append(_write_columns(path, out, decode_fast, CHUNK_SIZE))
            except Exception:  # this file: the parent loads it (and says what is wrong)
                records.append(None)
        records_at = out.tell()
        out.write(marshal.dumps(records))
        out.write(records_at.to_bytes(_FOOTER_BYTES, "little"))


def _write_columns(path: Path, out: Any, decode_fast: Any, chunk_size: int) -> _Record | None:
    from analyzers.traces.columns import DTYPES, ColumnBuilder

    cols = ColumnBuilder()
    decoded = decode_fast(path, cols, chunk_size)
    if decoded is None:
        return None
    metadata, hta_rank = decoded
    cols.flush()  # a value that does not fit its column raises: the parent says which
    start = out.tell()
    spans: list[tuple[int, int]] = []
    for key, dtype in DTYPES.items():
        at = out.tell()
        if at % _ALIGN:
            out.write(bytes(_ALIGN - at % _ALIGN))
            at = out.tell()
        nbytes = 0
        for block in cols.blocks[key]:
            if not isinstance(block, bytearray) and str(block.dtype) != dtype:
                raise TypeError(f"{key}: a block of {block.dtype}, not {dtype}")
            nbytes += out.write(block)
        spans.append((at, nbytes))
    record: _Record = (
        str(path),
        metadata,
        cols.symbols.names,
        hta_rank,
        cols.ts_has_float,
        cols.ts_all_present,
        cols.count,
        spans,
    )
    try:
        marshal.dumps(record)  # metadata of a type marshal cannot write: this file in process
    except ValueError:
        out.seek(start)
        out.truncate()
        return None
    return record
