"""Uploaded profiler traces on disk: check that a body is a whole gzip file, then store it atomically.

Layout: `<data_dir>/traces/<trace_id>.pt.trace.json.gz`, the name torch.profiler's
`tensorboard_trace_handler` gives gzip traces, so HTA and TensorBoard open the folder as it is.
A body is accepted only if it inflates completely (gzip CRC and length trailer checked) to
something that starts like a JSON object, within MAX_EXPANSION times its size (a gzip bomb is
refused without ever being held in memory). Writes go to a `.tmp-` file, fsync, rename.

Must never parse the trace (that is the analyzers' job) or keep a partial file under its final name.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import re
import zlib
from pathlib import Path

from fleetscope.errors import CorruptTraceError

TRACE_SUFFIX = ".pt.trace.json.gz"
# Kineto JSON compresses about 10-20x with gzip; 64x leaves room for repetitive CPU-only traces.
MAX_EXPANSION = 64
_CHUNK = 1 << 20
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


_READABLE_HOST_CHARS = 100


def trace_id_for(request_id: int, host: str, pid: int) -> str:
    """A stable, file-name-safe id: one trace per (request, host, process), never shared.

    A host that is already safe and short is used as it is (`req1-node-a-pid10`). Any other is
    shortened and made safe, then tagged `~` and 16 hex digits of its SHA-256: `~` is not a safe
    character, so a tagged id can never equal an untagged one, and `node/1` and `node_1` (or two
    hosts sharing their first 100 characters) no longer get the same id (issue 28).
    """
    safe = _UNSAFE.sub("_", host)
    if safe == host and len(host) <= _READABLE_HOST_CHARS:
        return f"req{request_id}-{host}-pid{pid}"
    digest = hashlib.sha256(host.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"req{request_id}-{safe[:80]}~{digest}-pid{pid}"


def check_gzip_trace(body: bytes) -> int:
    """The inflated size of `body`; CorruptTraceError naming what is wrong otherwise."""
    if body[:2] != b"\x1f\x8b":
        raise CorruptTraceError("not a gzip file (the body does not start with 1f 8b)")
    limit = max(len(body), 1) * MAX_EXPANSION
    total = 0
    first = b""
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(body)) as handle:
            while chunk := handle.read(_CHUNK):
                if not first.strip():
                    first += chunk[:64]
                total += len(chunk)
                if total > limit:
                    raise CorruptTraceError(
                        f"inflates past {MAX_EXPANSION}x its {len(body)} bytes; refused"
                    )
    except (OSError, EOFError, zlib.error) as exc:  # BadGzipFile is an OSError
        raise CorruptTraceError(f"corrupt gzip after {total} inflated bytes: {exc}") from exc
    if not first.lstrip().startswith(b"{"):
        raise CorruptTraceError("the gzip content is not a JSON object (a Kineto trace is one)")
    return total


def store_trace(traces_dir: Path, trace_id: str, body: bytes) -> Path:
    """Write `body` as `<traces_dir>/<trace_id>.pt.trace.json.gz` atomically; returns the path."""
    return write_atomically(traces_dir, f"{trace_id}{TRACE_SUFFIX}", body)


def write_atomically(folder: Path, name: str, body: bytes) -> Path:
    """`folder/name` holding `body`, never partly: a `.tmp-` file, fsync, rename."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    tmp = folder / f".tmp-{name}"
    with tmp.open("wb") as handle:
        handle.write(body)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
    return path
