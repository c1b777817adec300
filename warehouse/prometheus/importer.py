"""`fleetscope import prometheus`: backfill gpu_samples from a Prometheus server's HTTP API.

What it is for: history that Prometheus scraped from dcgm-exporter before fleetscope existed.
Each chunk of the range is one `GET /api/v1/query_range` per `--match` selector (default every
`DCGM_FI_*` series); the matrix is regrouped by (cluster, host, evaluation time) and turned into
rows by warehouse.prometheus.rows, the same conversion remote_write uses, so columns, units and
job attribution are what an agent would have produced from a page.

What query_range returns: at each evaluation time `start + k * step` the newest sample at or
before it (within Prometheus's 5 minute lookback), not the raw samples, so rows are stamped with
the evaluation time and `--step` should be at least the scrape interval (a smaller step repeats
samples). Prometheus refuses a query over 11,000 points per series (`exceeded maximum resolution
of 11,000 points per timeseries`, web/api/v1/api.go), so a chunk never holds more; `--chunk`
bounds it further because the answer holds every DCGM series of the fleet for that span.

Where rows go, and why: to the ingest server over the normal batch API (fleetscope.contract),
not into DuckDB directly. The running server owns the telemetry database (DuckDB allows one
writing process and a second one cannot even open a held file), ingest deduplicates by batch id
in its ledger, and the catalog hooks record hosts and GPU allocations as for agents' batches.

Idempotency: a chunk's batch ids are derived from (cluster, Prometheus URL, selectors, step,
chunk bounds, part), so re-running the same import stores nothing twice. Consequence: a range
is imported once; an `--end` in the future is refused because that chunk would be frozen
incomplete. A range remote_write already delivered would be stored again (resampled): do not
import it.

Must never: write the telemetry database itself, or import collector code beyond normalization.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import math
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

import pyarrow as pa

from fleetscope import __version__
from fleetscope.contract import (
    ARROW_STREAM_MEDIA_TYPE,
    HEADER_AGENT,
    HEADER_BATCH_ID,
    HEADER_SCHEMA_VERSION,
    SCHEMA_VERSION,
    to_ipc,
)
from fleetscope.errors import ConfigError, ContractError, IngestError, SourceUnavailableError
from fleetscope.exposition import Sample
from warehouse.prometheus.rows import (
    DCGM_PREFIX,
    ScrapeKey,
    exporter_labels,
    rows_for_scrape,
    rows_to_table,
    scrape_of,
)

__all__ = [
    "DEFAULT_MATCH",
    "MAX_POINTS",
    "ImportPlan",
    "ImportResult",
    "IngestClient",
    "PrometheusAPI",
    "chunks",
    "parse_duration_ms",
    "parse_time_ms",
    "rows_of_matrix",
    "run_import",
]

DEFAULT_MATCH: Final = '{__name__=~"DCGM_FI_.*"}'
MAX_POINTS: Final = 11_000  # Prometheus's limit per series and query (see the docstring)
AGENT: Final = "prometheus-import"
_DURATION_RE = re.compile(r"(\d+)(ms|y|w|d|h|m|s)")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_UNIT_MS |= {"w": 7 * _UNIT_MS["d"], "y": 365 * _UNIT_MS["d"]}


def parse_duration_ms(text: str, *, what: str) -> int:
    """A Prometheus duration ("10s", "1m30s", "500ms") or a number of seconds -> milliseconds."""
    text = text.strip()
    try:
        seconds = float(text)
    except ValueError:
        parts = _DURATION_RE.findall(text)
        if not parts or "".join(n + u for n, u in parts) != text:
            raise ConfigError(
                f"{what}: not a duration: {text!r} (use e.g. 10s, 1m, 1h30m or seconds)"
            ) from None
        ms = sum(int(n) * _UNIT_MS[u] for n, u in parts)
    else:
        if not math.isfinite(seconds):
            raise ConfigError(f"{what}: not a duration: {text!r}") from None
        ms = round(seconds * 1000)
    if ms <= 0:
        raise ConfigError(f"{what}: must be positive, got {text!r}")
    return ms


def parse_time_ms(text: str, *, what: str) -> int:
    """RFC 3339 / ISO 8601 with an offset, or Unix seconds (what Prometheus's API accepts)."""
    text = text.strip()
    try:
        return round(float(text) * 1000)
    except ValueError:
        pass
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        parsed = None
    if parsed is None or parsed.tzinfo is None:
        raise ConfigError(
            f"{what}: expected RFC 3339 with an offset (2026-01-05T00:00:00Z) or Unix seconds, "
            f"got {text!r}"
        )
    return round(parsed.astimezone(UTC).timestamp() * 1000)


def chunks(start_ms: int, end_ms: int, step_ms: int, points: int) -> Iterator[tuple[int, int]]:
    """(first, last) evaluation times of consecutive chunks of at most `points` grid points.

    The grid is start + k * step up to end inclusive; chunks share no point.
    """
    span = (points - 1) * step_ms
    first = start_ms
    while first <= end_ms:
        last = min(first + span, start_ms + (end_ms - start_ms) // step_ms * step_ms)
        yield first, last
        first = last + step_ms


@dataclass(frozen=True)
class ImportPlan:
    prometheus_url: str
    start_ms: int
    end_ms: int
    step_ms: int
    chunk_points: int
    matches: tuple[str, ...] = (DEFAULT_MATCH,)
    cluster: str = "default"
    batch_rows: int = 20_000

    def check(self, now_ms: int) -> None:
        if self.end_ms < self.start_ms:
            raise ConfigError("--end is before --start")
        if self.end_ms > now_ms:
            raise ConfigError(
                "--end is in the future: import only finished history (a chunk is imported "
                "once, so a partial one would stay partial)"
            )
        if not 1 <= self.chunk_points <= MAX_POINTS:
            raise ConfigError(f"a chunk must hold 1 to {MAX_POINTS} points per series")

    def batch_id(self, first_ms: int, last_ms: int, part: int) -> str:
        identity = "\n".join(
            [self.cluster, self.prometheus_url.rstrip("/"), *sorted(self.matches)]
            + [str(v) for v in (self.step_ms, first_ms, last_ms)]
        )
        return f"pi-{hashlib.sha256(identity.encode()).hexdigest()[:40]}-{part}"


Fetch = Callable[[str, float], bytes]


def _urllib_fetch(url: str, timeout_s: float) -> bytes:
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            body: bytes = response.read()
            return body
    except urllib.error.HTTPError as exc:
        return exc.read()  # Prometheus explains errors in the JSON body (status "error")
    except (urllib.error.URLError, OSError) as exc:
        raise SourceUnavailableError(f"GET {url.split('?', 1)[0]}: {exc}") from exc


class PrometheusAPI:
    """The one call of Prometheus's HTTP API the import needs; `fetch` is injectable."""

    def __init__(self, base_url: str, *, timeout_s: float = 120.0, fetch: Fetch = _urllib_fetch):
        if not base_url.startswith(("http://", "https://")):
            raise ConfigError(f"--url must be an http(s) URL of Prometheus, got {base_url!r}")
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s
        self.fetch = fetch

    def query_range(
        self, query: str, start_ms: int, end_ms: int, step_ms: int
    ) -> list[dict[str, Any]]:
        params = urllib.parse.urlencode(
            {
                "query": query,
                "start": f"{start_ms / 1000:.3f}",
                "end": f"{end_ms / 1000:.3f}",
                "step": f"{step_ms / 1000:.3f}",
            }
        )
        raw = self.fetch(f"{self.base_url}/api/v1/query_range?{params}", self.timeout_s)
        try:
            answer = json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise SourceUnavailableError(
                f"{self.base_url} did not answer with Prometheus API JSON: {raw[:200]!r}"
            ) from exc
        if not isinstance(answer, dict) or answer.get("status") != "success":
            error = answer.get("error") if isinstance(answer, dict) else answer
            raise ConfigError(f"Prometheus refused query_range {query!r}: {error}")
        data = answer.get("data") or {}
        if data.get("resultType") != "matrix":
            raise ContractError(f"query_range answered {data.get('resultType')!r}, not a matrix")
        result: list[dict[str, Any]] = data.get("result") or []
        return result


@dataclass
class MatrixRows:
    rows: list[dict[str, object]]
    series_ignored: int


def rows_of_matrix(
    results: list[dict[str, Any]],
    default_cluster: str,
    known_cluster: Callable[[str], str | None] | None = None,
) -> MatrixRows:
    """query_range series -> gpu_samples rows, one per GPU or MIG instance per evaluation time.

    A series without a `cluster` label takes the cluster `known_cluster` knows its host by (the
    catalog's, as remote_write does), so a host lands in the same cluster whatever path it came by.
    """
    scrapes: dict[tuple[ScrapeKey, int], dict[tuple[tuple[str, str], ...], Sample]] = {}
    ignored = 0
    for series in results:
        metric: dict[str, str] = series.get("metric") or {}
        name = metric.get("__name__", "")
        labels = exporter_labels(metric) if name.startswith(DCGM_PREFIX) else {}
        key = scrape_of(labels, default_cluster, known_cluster) if labels else None
        if key is None:
            ignored += 1
            continue
        sid = tuple(sorted(metric.items()))
        for t, value in series.get("values") or []:
            ts_ms = round(float(t) * 1000)
            scrapes.setdefault((key, ts_ms), {})[sid] = Sample(name, labels, float(value), None)
    rows = [
        row
        for (key, ts_ms), samples in sorted(scrapes.items())
        for row in rows_for_scrape(key, ts_ms, samples.values())
    ]
    return MatrixRows(rows, ignored)


class IngestClient:
    """Posts gpu_samples batches in the contract's wire format; retries 5xx and no answer."""

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        timeout_s: float = 60.0,
        attempts: int = 5,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        parsed = urllib.parse.urlsplit(base_url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise ConfigError(f"ingest URL must be http(s)://host[:port], got {base_url!r}")
        self.parsed = parsed
        self.token = token
        self.timeout_s = timeout_s
        self.attempts = attempts
        self.sleep = sleep

    def post(self, table: pa.Table, batch_id: str) -> bool:
        """Send one batch; True when ingest already had it (a re-run)."""
        body = to_ipc(table)
        headers = {
            "Authorization": f"Bearer {self.token}",
            "Content-Type": ARROW_STREAM_MEDIA_TYPE,
            HEADER_SCHEMA_VERSION: str(SCHEMA_VERSION),
            HEADER_BATCH_ID: batch_id,
            HEADER_AGENT: AGENT,
            "User-Agent": f"fleetscope-import/{__version__}",
        }
        last_error = ""
        for attempt in range(self.attempts):
            if attempt:
                self.sleep(min(2.0**attempt, 30.0))
            try:
                status, answer = self._request(body, headers)
            except OSError as exc:
                last_error = f"no answer: {exc}"
                continue
            if status == 202:
                return bool(answer.get("duplicate"))
            last_error = f"HTTP {status}: {answer.get('error', answer)}"
            if status < 500:
                raise IngestError(f"ingest refused batch {batch_id}: {last_error}", status=status)
        raise SourceUnavailableError(
            f"ingest at {self.parsed.geturl()} did not store batch {batch_id} after "
            f"{self.attempts} attempts: {last_error}; re-run the same import to resume"
        )

    def _request(self, body: bytes, headers: dict[str, str]) -> tuple[int, dict[str, Any]]:
        cls = (
            http.client.HTTPSConnection
            if self.parsed.scheme == "https"
            else http.client.HTTPConnection
        )
        conn = cls(self.parsed.hostname or "", self.parsed.port, timeout=self.timeout_s)
        try:
            conn.request("POST", "/v1/batches/gpu_samples", body=body, headers=headers)
            response = conn.getresponse()
            raw = response.read()
        finally:
            conn.close()
        try:
            answer = json.loads(raw) if raw else {}
        except (UnicodeDecodeError, json.JSONDecodeError):
            answer = {"error": raw[:200].decode("utf-8", "replace")}
        return response.status, answer if isinstance(answer, dict) else {"answer": answer}


@dataclass
class ImportResult:
    chunks: int = 0
    rows: int = 0  # rows sent (including batches ingest already had)
    duplicate_batches: int = 0
    batches: int = 0
    series_ignored: int = 0
    per_chunk: list[tuple[int, int, int]] = field(default_factory=list)  # first, last, rows


def run_import(
    plan: ImportPlan,
    api: PrometheusAPI,
    client: IngestClient,
    *,
    now_ms: int | None = None,
    progress: Callable[[str], None] = lambda _line: None,
    known_cluster: Callable[[str], str | None] | None = None,
) -> ImportResult:
    """Query, convert and send every chunk in time order; see the module docstring."""
    plan.check(now_ms if now_ms is not None else int(time.time() * 1000))
    result = ImportResult()
    for first_ms, last_ms in chunks(plan.start_ms, plan.end_ms, plan.step_ms, plan.chunk_points):
        matrix: list[dict[str, Any]] = []
        for match in plan.matches:
            matrix += api.query_range(match, first_ms, last_ms, plan.step_ms)
        converted = rows_of_matrix(matrix, plan.cluster, known_cluster)
        rows = converted.rows
        for part, offset in enumerate(range(0, len(rows), plan.batch_rows)):
            table = rows_to_table(rows[offset : offset + plan.batch_rows])
            duplicate = client.post(table, plan.batch_id(first_ms, last_ms, part))
            result.batches += 1
            result.duplicate_batches += duplicate
        result.chunks += 1
        result.rows += len(rows)
        result.series_ignored += converted.series_ignored
        result.per_chunk.append((first_ms, last_ms, len(rows)))
        progress(
            f"{datetime.fromtimestamp(first_ms / 1000, UTC):%Y-%m-%dT%H:%M:%SZ} "
            f"{len(rows)} rows ({converted.series_ignored} non-DCGM series ignored)"
        )
    return result
