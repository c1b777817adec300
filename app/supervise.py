"""Start, watch and stop a group of child processes so that none is left behind.

Used by `fleetscope demo` and by end-to-end tests. Each child gets its own session (process group),
so a Ctrl-C reaches only the supervisor, which then stops the children in the reverse of their start
order (agents flush before the server, the server flushes before it goes): SIGTERM to the whole
group, then SIGKILL after a grace period. Children started one after another in the same
`stop_group` (the demo's sixteen agents) are stopped together: SIGTERM to each, then one grace
period for all; one by one, the demo took over a minute to stop.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from fleetscope.errors import SourceUnavailableError


@dataclass
class Child:
    name: str
    process: subprocess.Popen[bytes]
    log_path: Path | None
    stop_group: str | None = None


@dataclass
class Supervisor:
    """Owns child processes; use as a context manager so they are always stopped."""

    log_dir: Path | None = None
    grace_s: float = 10.0
    children: list[Child] = field(default_factory=list)

    def start(
        self,
        name: str,
        argv: Sequence[str],
        env: Mapping[str, str] | None = None,
        stop_group: str | None = None,
    ) -> Child:
        log: IO[bytes] | int = subprocess.DEVNULL
        log_path = None
        if self.log_dir is not None:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            log_path = self.log_dir / f"{name}.log"
            log = log_path.open("ab")
        child_env = dict(os.environ)
        child_env.update(env or {})
        child_env.setdefault("PYTHONUNBUFFERED", "1")
        process = subprocess.Popen(
            list(argv), env=child_env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        if not isinstance(log, int):
            log.close()
        child = Child(name, process, log_path, stop_group)
        self.children.append(child)
        return child

    def check_alive(self) -> None:
        """Raise if a child died: a demo with a dead server must not pretend to run."""
        for child in self.children:
            code = child.process.poll()
            if code is not None:
                where = f" (log: {child.log_path})" if child.log_path else ""
                raise SourceUnavailableError(
                    f"{child.name} exited with code {code}{where}{_last_lines(child.log_path)}"
                )

    def stop(self, child: Child) -> int:
        self._stop_together([child])
        return child.process.returncode

    def _stop_together(self, children: Sequence[Child]) -> None:
        """SIGTERM to each child's group, one grace period for all of them, then SIGKILL."""
        for child in children:
            if child.process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(child.process.pid, signal.SIGTERM)
        deadline = time.monotonic() + self.grace_s
        for child in children:
            try:
                child.process.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(child.process.pid, signal.SIGKILL)
                child.process.wait()
            # Reap anything left in the child's group (a grandchild that ignored SIGTERM).
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(child.process.pid, signal.SIGKILL)

    def stop_all(self) -> None:
        """Stop every child, newest first. A second Ctrl-C (or SIGTERM) while they stop, as an
        impatient user gives, kills the rest at once: it used to end this process mid-way and
        leave the children not yet stopped running (a server still holding the demo's ports)."""
        try:
            for together in _stop_order(self.children):
                self._stop_together(together)
        except KeyboardInterrupt:
            self.kill_all()
            raise
        finally:
            self.children.clear()

    def kill_all(self) -> None:
        """SIGKILL to every child's group; Ctrl-C and SIGTERM are ignored until all are gone (on
        the main thread, where Python runs signal handlers: one more press must not cut this
        short too)."""
        ignored = {}
        if threading.current_thread() is threading.main_thread():
            ignored = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            for child in self.children:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(child.process.pid, signal.SIGKILL)
            for child in self.children:
                child.process.wait()
        finally:
            for signum, handler in ignored.items():
                signal.signal(signum, handler)

    def __enter__(self) -> Supervisor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_all()


def _stop_order(children: Sequence[Child]) -> list[list[Child]]:
    """Newest first; a run of children started one after another in one `stop_group` together."""
    order: list[list[Child]] = []
    for child in reversed(children):
        previous = order[-1][-1] if order else None
        if previous is not None and child.stop_group and child.stop_group == previous.stop_group:
            order[-1].append(child)
        else:
            order.append([child])
    return order


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def wait_until(
    ready: Callable[[], bool], timeout_s: float, what: str, check: Callable[[], None] | None = None
) -> None:
    """Poll `ready` until true; `check` may raise early (a child died)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check is not None:
            check()
        if ready():
            return
        time.sleep(0.2)
    raise SourceUnavailableError(f"{what} not ready after {timeout_s:.0f} s")


def http_ok(url: str) -> Callable[[], bool]:
    def probe() -> bool:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                return bool(200 <= response.status < 300)
        except (urllib.error.URLError, OSError):
            return False

    return probe


def _last_lines(log_path: Path | None, lines: int = 5) -> str:
    """The end of a dead child's log, indented under the error: why it died is usually there
    (an argparse error, a port in use), and a log under a temporary folder may be gone by the
    time someone reads the message (a CI run)."""
    if log_path is None:
        return ""
    try:
        with log_path.open("rb") as log:
            log.seek(0, os.SEEK_END)
            log.seek(max(0, log.tell() - 4096))
            tail = log.read().decode("utf-8", "replace").splitlines()[-lines:]
    except OSError:
        return ""
    return "".join(f"\n  | {line}" for line in tail)
