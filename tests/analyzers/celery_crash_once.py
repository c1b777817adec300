"""Loaded into a test worker with `--include`: the first task the worker starts kills its pool
process (as an OOM kill or a segfault would), once per marker file. Test-only; never shipped."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from celery.signals import task_prerun


@task_prerun.connect
def _crash_once(**_: Any) -> None:
    marker = Path(os.environ["FLEETSCOPE_TEST_CRASH_MARKER"])
    try:
        marker.touch(exist_ok=False)
    except FileExistsError:
        return
    os._exit(1)
