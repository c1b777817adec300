"""`fleetscope demo`'s supervisor (app.supervise) leaves no process behind, however it is stopped."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

# Children that take SIGTERM slowly (a server flushing): each notes the SIGTERM and goes on.
CHILD = """
import pathlib, signal, sys, time
note = pathlib.Path(sys.argv[1])
signal.signal(signal.SIGTERM, lambda *_: note.write_text("term"))
note.with_suffix(".up").write_text("up")
while True:
    time.sleep(0.05)
"""

SUPERVISOR = """
import sys, time
from app.demo import _stop_on_ctrl_c_and_sigterm
from app.supervise import Supervisor

_stop_on_ctrl_c_and_sigterm()
folder = sys.argv[1]
with Supervisor(grace_s=600) as supervisor:
    children = [
        supervisor.start(f"c{i}", [sys.executable, "-c", sys.argv[2], f"{folder}/c{i}.term"])
        for i in range(3)
    ]
    print(" ".join(str(c.process.pid) for c in children), flush=True)
    try:
        while True:
            time.sleep(0.05)
    except KeyboardInterrupt:
        print("stopping", flush=True)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _wait(condition: Callable[[], bool], timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_a_second_ctrl_c_while_children_stop_kills_them_all(tmp_path: Path) -> None:
    """The first Ctrl-C stops the children newest first, waiting for each; a second one while
    the newest still flushes kills all three at once (it used to leave the other two running)."""
    supervisor = subprocess.Popen(
        [sys.executable, "-c", SUPERVISOR, str(tmp_path), CHILD],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert supervisor.stdout is not None
    pids = [int(p) for p in supervisor.stdout.readline().split()]
    try:
        _wait(lambda: all((tmp_path / f"c{i}.up").exists() for i in range(3)))
        supervisor.send_signal(signal.SIGINT)
        _wait(lambda: (tmp_path / "c2.term").exists())  # the newest child is being stopped
        assert not (tmp_path / "c1.term").exists()
        supervisor.send_signal(signal.SIGINT)
        assert supervisor.wait(60) != 0  # the second Ctrl-C ends it, as a KeyboardInterrupt
        _wait(lambda: not any(_alive(pid) for pid in pids))
    finally:
        for pid in pids:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
        supervisor.kill()
        supervisor.wait()
        supervisor.stdout.close()


# An agent: on SIGTERM it notes it, waits for its siblings' notes (they must be told together)
# and says "exited"; the server: on SIGTERM it checks every agent has exited (it goes last).
AGENT = """
import pathlib, signal, sys, time
folder, me, siblings = pathlib.Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])

def stop(*_):
    (folder / f"{me}.term").write_text("term")
    deadline = time.monotonic() + 20
    while len(list(folder.glob("agent-*.term"))) < siblings and time.monotonic() < deadline:
        time.sleep(0.01)
    told_together = len(list(folder.glob("agent-*.term"))) == siblings
    (folder / f"{me}.exited").write_text("exited")
    sys.exit(0 if told_together else 3)

signal.signal(signal.SIGTERM, stop)
(folder / f"{me}.up").write_text("up")
while True:
    time.sleep(0.05)
"""

SERVER = """
import pathlib, signal, sys, time
folder, agents = pathlib.Path(sys.argv[1]), int(sys.argv[2])
signal.signal(
    signal.SIGTERM,
    lambda *_: sys.exit(0 if len(list(folder.glob("agent-*.exited"))) == agents else 3),
)
(folder / "server.up").write_text("up")
while True:
    time.sleep(0.05)
"""


def test_a_stop_group_is_told_together_and_before_what_started_earlier(tmp_path: Path) -> None:
    """The demo's agents are stopped together, then the server (started first) after them."""
    from app.supervise import Supervisor

    supervisor = Supervisor(grace_s=60)
    server = supervisor.start("server", [sys.executable, "-c", SERVER, str(tmp_path), "4"])
    agents = [
        supervisor.start(
            name, [sys.executable, "-c", AGENT, str(tmp_path), name, "4"], stop_group="agents"
        )
        for name in (f"agent-{i}" for i in range(4))
    ]
    _wait(lambda: len(list(tmp_path.glob("*.up"))) == 5)
    supervisor.stop_all()
    assert [a.process.returncode for a in agents] == [0, 0, 0, 0]
    assert server.process.returncode == 0


def test_a_dead_child_is_reported_with_the_end_of_its_log(tmp_path: Path) -> None:
    """What killed it is in the error itself: the log may be gone when someone reads it."""
    import pytest

    from app.supervise import Supervisor
    from fleetscope.errors import SourceUnavailableError

    script = "import sys\nfor i in range(9): print('line', i)\nsys.exit('usage: bad --token')"
    with Supervisor(log_dir=tmp_path) as supervisor:
        child = supervisor.start("simulator", [sys.executable, "-c", script])
        child.process.wait(60)
        with pytest.raises(SourceUnavailableError) as raised:
            supervisor.check_alive()
    assert str(raised.value) == (
        f"simulator exited with code 1 (log: {tmp_path / 'simulator.log'})"
        "\n  | line 5\n  | line 6\n  | line 7\n  | line 8\n  | usage: bad --token"
    )
