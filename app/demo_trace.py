"""The demo's one trace with GPU kernels: a real V100 ResNet-50 trace (simulator/traces/README.md),
uploaded at demo start as the profile of the demo job `demo-resnet50` through the server's own
profiling API, exactly as an agent would: the job announced (`POST /v1/jobs`), a profile request
(`POST /v1/profile-requests`), a poll from the job's host reporting its process
(`POST /v1/agent/poll`), then the trace (`POST /v1/traces`). The server stores and analyses it as
any upload, so the Traces list, the Trace page's kernels and what-if views have GPU work to show
(the simulated fleet's processes cannot be profiled, and the demo's PyTorch process runs on CPU).

The host name is one no simulated agent uses, so no real agent competes for the request.

The file was recorded on 2021-06-08, and a trace's findings carry the trace's own time: left as
it is, they fell outside the demo's default window. So the upload is stamped as if captured now
(`stamped`): every event moved by one whole number of microseconds, so that the trace ends at the
upload; durations, order and everything else are the file's, byte for byte.
"""

from __future__ import annotations

import gzip
import json
import re
import urllib.parse
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import simulator

TRACE = Path(simulator.__file__).parent / "traces" / "resnet50_v100_nw0.pt.trace.json.gz"
JOB = {
    "job_id": "demo-resnet50",
    "user": "newcomer",
    "team": "demo",
    "name": "resnet50 on V100, num_workers=0 (real trace)",
}
HOST = "demo-v100"
PID = 4242  # the traced process, as the trace's agent reports it
# An event's start in the Chrome trace format Kineto writes: `"ts": <microseconds>` (every event
# of this file has one, an integer; it has no `baseTimeNanoseconds`).
EVENT_TS = re.compile(rb'"ts": (-?\d+)')


def stamped(trace_gz: bytes, end: datetime) -> bytes:
    """The gzipped trace with every event's `ts` moved by one whole number of microseconds so that
    the last event starts at `end`; nothing else changes."""
    raw = gzip.decompress(trace_gz)
    starts = [int(ts) for ts in EVENT_TS.findall(raw)]
    if not starts:
        raise ValueError("the demo trace has no event timestamps")
    shift = int(end.timestamp() * 1_000_000) - max(starts)
    moved = EVENT_TS.sub(lambda m: b'"ts": %d' % (int(m.group(1)) + shift), raw)
    return gzip.compress(moved, compresslevel=6)


def _post(url: str, token: str, body: bytes, content_type: str) -> dict[str, Any]:
    request = urllib.request.Request(
        url,
        data=body,
        headers={"Authorization": f"Bearer {token}", "Content-Type": content_type},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=60) as answer:
        found: dict[str, Any] | list[Any] = json.loads(answer.read() or b"{}")
    return found if isinstance(found, dict) else {}


def _json(url: str, token: str, payload: Any) -> dict[str, Any]:
    return _post(url, token, json.dumps(payload).encode(), "application/json")


def upload(ingest_url: str, token: str) -> str:
    """Upload the trace as `demo-resnet50`'s profile; returns its trace id."""
    _json(f"{ingest_url}/v1/jobs", token, [JOB])
    job_id = JOB["job_id"]
    request_id = _json(
        f"{ingest_url}/v1/profile-requests", token, {"job_id": job_id, "rank": 0, "steps": 5}
    )["id"]
    process = {"pid": PID, "job_id": job_id, "rank": 0}
    assigned = _json(f"{ingest_url}/v1/agent/poll", token, {"host": HOST, "processes": [process]})
    if not any(a.get("request_id") == request_id for a in assigned.get("requests", [])):
        raise RuntimeError(f"profile request {request_id} was not assigned to {HOST}: {assigned}")
    query = urllib.parse.urlencode({"request_id": request_id, "host": HOST, "pid": PID, "rank": 0})
    body = stamped(TRACE.read_bytes(), datetime.now(UTC))
    stored = _post(f"{ingest_url}/v1/traces?{query}", token, body, "application/octet-stream")
    return str(stored["trace_id"])
