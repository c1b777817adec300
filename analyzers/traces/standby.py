"""A process that waits, numpy already imported, to run the command on numpy should the small-trace
engine give up (issue 19).

Why: when listnp cannot answer a trace exactly (engine.py: the ties of numpy's unstable sort
changed a number, on a trace of repeated timestamps), the command runs again on numpy. Re-running
it in a fresh process pays Python's start, the command line and numpy's import after the lite
attempt (~80 ms of a ~250 ms run on a 250-event trace, where the numpy engine alone takes ~150).
So before the lite attempt the command forks this standby, which imports numpy and the numpy
engine on the other core while the lite attempt runs, then waits. If the lite engine answers,
the standby is killed; if it gives up, the standby runs the command's numpy path itself (it is a
fork of the command: same arguments, stdout and stderr, and nothing was printed before) and the
command exits with its code.

Only where that can pay: a trace of `MIN_TEXT_BYTES` or more (below, the lite attempt is short and
the standby slows it more than it saves), and as for the prefetch children (prefetch.py), Linux
with fork, no thread running and a core free at this instant (on a busy machine the standby would
only take CPU from the lite attempt; the command then re-executes itself on numpy instead,
cli._rerun_on_numpy). `FLEETSCOPE_TRACE_STANDBY=0` turns it off, `=1` forks it whether a core is
free or not. The standby dies with the command (PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

from analyzers.traces.engine import text_bytes
from analyzers.traces.prefetch import a_core_is_free, die_with

__all__ = ["MIN_TEXT_BYTES", "SWITCH", "TAKE_OVER", "Standby", "start_standby"]

SWITCH = "FLEETSCOPE_TRACE_STANDBY"
# Below this much JSON text the standby costs more than it saves: the lite attempt is ~70 ms,
# mostly start-up, and the standby importing numpy on the other vCPU slowed it by ~10 ms (minitoy,
# 67 KiB: 71 -> 82 ms, 60 runs; the two vCPUs share a core here), on the path where lite answers,
# for ~45 ms saved on the path where it does not.
MIN_TEXT_BYTES = 256 << 10
_SIGKILL = 9
_GO = b"g"


class Standby:
    """The parent's handle on the waiting process."""

    def __init__(self, pid: int, go_fd: int) -> None:
        self.pid = pid
        self.go_fd = go_fd

    def take_over(self) -> int | None:
        """Let the standby run the command on numpy; its exit code once it has finished, or None
        when it is gone already (it failed before it was needed: re-execute instead)."""
        try:
            os.write(self.go_fd, _GO)
        except BrokenPipeError:
            os.waitpid(self.pid, 0)
            return None
        finally:
            os.close(self.go_fd)
        _, status = os.waitpid(self.pid, 0)
        return os.waitstatus_to_exitcode(status)

    def cancel(self) -> None:
        """Kill the standby (the lite engine answered). Not reaped: waiting for the kernel to
        tear down a process half-way through numpy's import took the command ~5 ms, and the
        command is about to exit, which hands the dead child to init to reap."""
        os.close(self.go_fd)
        os.kill(self.pid, _SIGKILL)  # not reaped yet, so it exists, if only as a zombie


class _TakeOver:
    """What `start_standby` returns in the standby once the command needs it."""


TAKE_OVER = _TakeOver()


def start_standby(paths: Sequence[str | Path]) -> Standby | _TakeOver | None:
    """Fork the standby for the trace at `paths` where it can pay (module docstring). In the
    command: the standby's handle, or None. In the standby, once the command gives the word:
    TAKE_OVER, on numpy, so that the caller runs the command's numpy path in the call stack the
    fork copied (its errors turned into messages and codes by the same edge); without the word
    the standby exits here."""
    switch = os.environ.get(SWITCH, "").strip().lower()
    if switch in ("0", "false", "no", "off"):
        return None
    forced = switch in ("1", "true", "yes", "on")
    if not forced and (text_bytes(paths) or 0) < MIN_TEXT_BYTES:
        return None
    if sys.platform != "linux" or not hasattr(os, "fork") or "numpy" in sys.modules:
        return None
    threading = sys.modules.get("threading")
    if threading is not None and threading.active_count() > 1:
        return None
    if not forced and not a_core_is_free():
        return None
    sys.stdout.flush()
    sys.stderr.flush()
    go_read, go_write = os.pipe()
    parent = os.getpid()
    pid = os.fork()
    if pid:
        os.close(go_read)
        return Standby(pid, go_write)
    os.close(go_write)
    _wait_ready(go_read, parent)
    return TAKE_OVER


def _wait_ready(go_read: int, parent: int) -> None:
    """The standby: numpy and the numpy engine imported, then wait for the word; exit without
    it, or on any failure before it (the command then re-executes itself)."""
    try:
        die_with(parent)
        from analyzers.traces import xp

        xp.choose("numpy")
        _import_numpy_engine()
        go = os.read(go_read, 1) == _GO
    except BaseException:
        go = False
    os.close(go_read)
    if not go:
        os._exit(0)


def _import_numpy_engine() -> None:
    """What the command on numpy imports, imported as cli._report_text imports it."""
    from analyzers.traces.numpy_docs import numpy_as_a_command_imports_it

    with numpy_as_a_command_imports_it(whole_process=True):
        import analyzers.traces.api
        import analyzers.traces.render  # noqa: F401
