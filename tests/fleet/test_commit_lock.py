"""The per-table commit lock on a real PostgreSQL: one holder at a time per table, a waiter past its
deadline gets 503 (retry), other tables are not held up, and a holder that dies releases it."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest
from sqlalchemy import create_engine

from tests.fleet.conftest import wait_until
from warehouse.fleet.commit_lock import CommitLockTimeoutError, lock_key, table_commit_lock


def test_one_committer_per_table_and_a_waiter_past_its_deadline_gets_503(pg_url: str) -> None:
    engine = create_engine(pg_url)
    held, release = threading.Event(), threading.Event()

    def holder() -> None:
        with table_commit_lock(engine, "fleetscope.gpu_samples", time.monotonic() + 30):
            held.set()
            release.wait(30)

    thread = threading.Thread(target=holder)
    thread.start()
    try:
        assert held.wait(30)
        with (
            pytest.raises(CommitLockTimeoutError) as refused,
            table_commit_lock(engine, "fleetscope.gpu_samples", time.monotonic() + 0.3),
        ):
            pass
        assert refused.value.status == 503
        with table_commit_lock(engine, "fleetscope.host_samples", time.monotonic() + 5):
            pass  # another table's commits are not held up
    finally:
        release.set()
        thread.join()
    with table_commit_lock(engine, "fleetscope.gpu_samples", time.monotonic() + 5):
        pass
    engine.dispose()


def test_a_holder_killed_mid_commit_releases_the_lock(pg_url: str) -> None:
    script = (
        "import sys, time\n"
        "from sqlalchemy import create_engine\n"
        "from warehouse.fleet.commit_lock import table_commit_lock\n"
        "with table_commit_lock(create_engine(sys.argv[1]), 't', time.monotonic() + 30):\n"
        "    print('held', flush=True)\n"
        "    time.sleep(600)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script, pg_url], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        engine = create_engine(pg_url)
        with (
            pytest.raises(CommitLockTimeoutError),
            table_commit_lock(engine, "t", time.monotonic() + 0.3),
        ):
            pass
        proc.kill()  # kill -9 while holding it
        proc.wait()

        def free() -> bool:
            try:
                with table_commit_lock(engine, "t", time.monotonic() + 0.5):
                    return True
            except CommitLockTimeoutError:
                return False

        wait_until(free, 30, "the dead holder's lock released")
        engine.dispose()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def test_lock_keys_are_stable_and_distinct_per_table() -> None:
    assert lock_key("fleetscope.gpu_samples") == lock_key("fleetscope.gpu_samples")
    assert lock_key("fleetscope.gpu_samples") != lock_key("fleetscope.host_samples")
    assert -(2**63) <= lock_key("x") < 2**63
