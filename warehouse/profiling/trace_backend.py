"""Where uploaded profiler traces live, by `server.mode`: one way to store and open a trace by id.

    embedded   LocalTraceStorage: `<data_dir>/traces/<trace_id>.pt.trace.json.gz` (trace_store)
    fleet      warehouse.fleet.trace_objects.ObjectTraceStorage: the same file name under
               `<fleet.warehouse_uri>/traces/` in the fleet's bucket, so a trace uploaded to any
               gateway is read by every gateway, the dashboard and the CLI

The ingest (ProfilingService), the dashboard's trace page and `fleetscope trace fetch` get their
storage from `trace_storage(settings)` (the `STORAGES` mapping) and never ask which mode runs.
Every implementation stores only bodies already checked (`trace_store.check_gzip_trace`) and never
shows a partial body under a trace's final name. Must never parse a trace.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from fleetscope.errors import ConfigError, NotFoundError
from warehouse.profiling.trace_files import TRACE_SUFFIX, store_trace

if TYPE_CHECKING:
    from fleetscope.settings import Settings


class TraceStorage(Protocol):
    def store(self, trace_id: str, body: bytes) -> str:
        """Store a checked trace atomically; its location (a path or an s3:// URI) for the
        catalog's `traces.path`, what the API answers."""
        ...

    def size_bytes(self, trace_id: str) -> int | None:
        """The stored trace's size; None when there is none."""
        ...

    def read_bytes(self, trace_id: str) -> bytes:
        """The stored trace's bytes; NotFoundError when there is none."""
        ...

    def local_path(self, trace_id: str) -> Path:
        """A file on this machine holding the trace (the analyzers read files); NotFoundError
        when there is none."""
        ...


class LocalTraceStorage:
    """Traces in one folder of this machine: the embedded server's `<data_dir>/traces`."""

    def __init__(self, traces_dir: Path) -> None:
        self.traces_dir = traces_dir

    def _path(self, trace_id: str) -> Path:
        return self.traces_dir / f"{trace_id}{TRACE_SUFFIX}"

    def store(self, trace_id: str, body: bytes) -> str:
        return str(store_trace(self.traces_dir, trace_id, body))

    def size_bytes(self, trace_id: str) -> int | None:
        path = self._path(trace_id)
        return path.stat().st_size if path.is_file() else None

    def read_bytes(self, trace_id: str) -> bytes:
        return self.local_path(trace_id).read_bytes()

    def local_path(self, trace_id: str) -> Path:
        path = self._path(trace_id)
        if not path.is_file():
            raise NotFoundError(f"no stored trace {trace_id!r} (no {path})")
        return path


def traces_dir(settings: Settings) -> Path:
    return settings.path(settings.core.data_dir) / "traces"


def _local(settings: Settings) -> TraceStorage:
    return LocalTraceStorage(traces_dir(settings))


def _objects(settings: Settings) -> TraceStorage:
    # Imported on use: pyiceberg and the S3 client are the fleet extra; embedded never loads them.
    from warehouse.fleet.trace_objects import ObjectTraceStorage

    return ObjectTraceStorage.from_settings(settings)


STORAGES: Mapping[str, Callable[[Settings], TraceStorage]] = {
    "embedded": _local,
    "fleet": _objects,
}


def trace_storage(settings: Settings) -> TraceStorage:
    """The trace storage of `settings.server.mode` (`STORAGES`)."""
    mode = settings.server.mode
    if mode not in STORAGES:
        raise ConfigError(f"server.mode must be one of {', '.join(STORAGES)}, got {mode!r}")
    return STORAGES[mode](settings)
