"""The agent's spool holds job data: 0600 files in 0700 folders whatever the umask (issue 28)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from collector.spool import Spool


def test_spooled_and_dead_lettered_batches_are_private_under_umask_022(tmp_path: Path) -> None:
    root = tmp_path / "spool"
    previous = os.umask(0o022)
    try:
        spool = Spool(root, max_bytes=1 << 20)
        first, second = spool.put_many([("gpu_samples", b"a"), ("gpu_samples", b"b")])
        spool.dead_letter(second, "400 not Arrow")
    finally:
        os.umask(previous)
    assert stat.S_IMODE(root.stat().st_mode) == 0o700
    assert stat.S_IMODE((root / "dead").stat().st_mode) == 0o700
    written = [first.path, *(root / "dead").iterdir()]
    assert len(written) == 3
    assert {stat.S_IMODE(p.stat().st_mode) for p in written} == {0o600}


def test_a_spool_left_readable_by_an_earlier_version_is_tightened(tmp_path: Path) -> None:
    root = tmp_path / "spool"
    root.mkdir(mode=0o755)
    old = root / "0000000000000001.gpu_samples.abc.arrow"
    old.write_bytes(b"x")
    os.chmod(old, 0o644)
    os.chmod(root, 0o755)
    Spool(root, max_bytes=1 << 20)
    assert stat.S_IMODE(root.stat().st_mode) == 0o700
    assert stat.S_IMODE(old.stat().st_mode) == 0o600
