"""The DataLoader patch behind the no-code path (see collector/sdk/autostart/sitecustomize.py)."""

from __future__ import annotations

import multiprocessing
from collections.abc import Iterator
from typing import Any

from collector.sdk.monitor import get_monitor


def install() -> None:
    from torch.utils.data import DataLoader

    if getattr(DataLoader, "_fleetscope_patched", False):
        return
    original = DataLoader.__iter__

    def measured_iter(self: Any) -> Iterator[Any]:
        iterator = original(self)
        if multiprocessing.current_process().name != "MainProcess":
            return iterator  # a worker process: the main process measures the loader
        return get_monitor().wrap(iterator, workers=self.num_workers)

    DataLoader.__iter__ = measured_iter  # type: ignore[method-assign,assignment]
    DataLoader._fleetscope_patched = True  # type: ignore[attr-defined]
