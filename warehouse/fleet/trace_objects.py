"""Uploaded profiler traces as objects in the fleet's bucket, so every gateway, the dashboard and
the CLI read a trace whichever gateway received it (warehouse.profiling.trace_backend's fleet storage).

Key: `<fleet.warehouse_uri>/traces/<trace_id>.pt.trace.json.gz`, the file name of the embedded
store, outside every Iceberg table's location (the orphan sweep lists table locations only).
Written with pyarrow's S3 output stream, the client the Iceberg tables use: a body under its part
size (10 MiB) goes as one PutObject at close, a larger one as a multipart upload that Arrow
completes only once every part succeeded (`FinishPartUploadAfterFlush`); either way S3 shows the
object under its key only when whole, never half-uploaded. Readers that need a file (the
analyzers) get a copy in a local cache folder, written `.tmp-` then renamed; a trace never changes
once stored (one upload per process and request, claimed in the catalog), so a cached copy of the
stored size is that trace.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

from fleetscope.errors import NotFoundError
from warehouse.fleet.tables import FleetConfig, s3_filesystem
from warehouse.profiling.trace_files import TRACE_SUFFIX

if TYPE_CHECKING:
    from pyarrow.fs import S3FileSystem

    from fleetscope.settings import Settings


class ObjectTraceStorage:
    def __init__(
        self, config: FleetConfig, cache_dir: Path, fs: S3FileSystem | None = None
    ) -> None:
        self._fs = fs if fs is not None else s3_filesystem(config)
        self._prefix = config.warehouse_uri.removeprefix("s3://").rstrip("/") + "/traces"
        self.cache_dir = cache_dir

    @classmethod
    def from_settings(cls, settings: Settings) -> ObjectTraceStorage:
        """The fleet's bucket; readers that need a file get it cached in `<data_dir>/trace_cache`."""
        cache = settings.path(settings.core.data_dir) / "trace_cache"
        return cls(FleetConfig.from_settings(settings), cache)

    def key(self, trace_id: str) -> str:
        """`bucket/prefix/traces/<trace_id>.pt.trace.json.gz`, as pyarrow names objects."""
        return f"{self._prefix}/{trace_id}{TRACE_SUFFIX}"

    def store(self, trace_id: str, body: bytes) -> str:
        key = self.key(trace_id)
        # compression=None: pyarrow's default ("detect") would gzip the gzip body again for its
        # .gz name, storing an object no trace tool opens (and reading it back would hide that).
        stream = self._fs.open_output_stream(key, compression=None)
        stream.write(body)
        stream.close()  # the PutObject (or CompleteMultipartUpload): the object appears whole
        return f"s3://{key}"

    def size_bytes(self, trace_id: str) -> int | None:
        from pyarrow.fs import FileType

        info = self._fs.get_file_info(self.key(trace_id))
        return int(info.size) if info.type == FileType.File and info.size is not None else None

    def read_bytes(self, trace_id: str) -> bytes:
        key = self.key(trace_id)
        try:
            with self._fs.open_input_stream(key, compression=None) as stream:
                return bytes(stream.read())
        except FileNotFoundError as exc:
            raise NotFoundError(f"no stored trace {trace_id!r} (no object s3://{key})") from exc

    def local_path(self, trace_id: str) -> Path:
        path = self.cache_dir / f"{trace_id}{TRACE_SUFFIX}"
        size = self.size_bytes(trace_id)
        if size is None:
            raise NotFoundError(
                f"no stored trace {trace_id!r} (no object s3://{self.key(trace_id)})"
            )
        if path.is_file() and path.stat().st_size == size:
            return path
        body = self.read_bytes(trace_id)
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.cache_dir / f".tmp-{uuid.uuid4().hex}-{trace_id}{TRACE_SUFFIX}"
        tmp.write_bytes(body)
        os.replace(tmp, path)
        return path
