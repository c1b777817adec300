"""Agents (the collector's real spool and shipper) against a server process that is `kill -9`'d
several times and then down for a while: nothing acknowledged is lost or stored twice.

The long version (6 kills, 120 s down) is `python -m bench.faults`; figures in bench/RESULTS.md.
"""

from __future__ import annotations

from pathlib import Path

from bench.faults import run


def test_kill_9_and_an_outage_lose_and_duplicate_nothing(tmp_path: Path) -> None:
    result = run(tmp_path, agents=6, kills=2, down_s=3.0, interval_s=0.5, seed=12)
    assert result.kills == 3 and result.batches > 0
    assert (result.lost, result.duplicated) == (0, 0)
    assert result.stored_rows == result.sealed_rows
