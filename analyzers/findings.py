"""The Finding: what every analyzer (telemetry rule, pipeline rule, trace analysis) returns.

A finding names one antipattern on one job (and host and GPUs) over one time window, with the
numbers that triggered it, the GPU-hours the fix would return and how that was estimated, and a
recommendation a user can act on. Its `finding_id` is a stable hash of what the finding is *about*
(rule, job, host, GPUs, identity bucket, scope), never of what it *says*, so re-running a window
updates the stored finding instead of adding a duplicate.

This module is shared by every analyzer family: keep it free of I/O and of heavy imports (no DuckDB,
SQLAlchemy or Celery), and change its fields only compatibly (new fields get defaults).
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

__all__ = ["Finding", "Severity", "finding_id", "gpu_label"]


class Severity(StrEnum):
    """How urgently a human should look; ordered INFO < WARN < CRITICAL."""

    INFO = "info"
    WARN = "warn"
    CRITICAL = "critical"

    @property
    def rank(self) -> int:
        return _SEVERITY_RANK[self]


_SEVERITY_RANK = {Severity.INFO: 0, Severity.WARN: 1, Severity.CRITICAL: 2}


def gpu_label(gpu_index: int, mig_instance_id: int | None = None) -> str:
    """How a finding names a GPU: "3" for a whole GPU, "3/mig1" for MIG GPU instance 1 on GPU 3."""
    return str(gpu_index) if mig_instance_id is None else f"{gpu_index}/mig{mig_instance_id}"


def _utc(ts: datetime) -> datetime:
    if ts.tzinfo is None:
        raise ValueError(f"naive datetime {ts!r}: findings keep UTC-aware times only")
    return ts.astimezone(UTC)


def finding_id(
    rule_id: str,
    job_id: str | None,
    host: str | None,
    gpus: tuple[str, ...],
    bucket_start: datetime,
    scope: str = "",
) -> str:
    """Stable identity: 24 hex chars of SHA-256 over the fields that say what a finding is about.

    GPU order does not matter; the bucket is compared in UTC to the second.
    """
    parts = (
        rule_id,
        job_id or "",
        host or "",
        ",".join(sorted(gpus)),
        _utc(bucket_start).strftime("%Y-%m-%dT%H:%M:%SZ"),
        scope,
    )
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:24]


@dataclass(frozen=True, slots=True)
class Finding:
    """One antipattern on one job over one window; see the module docstring.

    - `gpus`: labels from `gpu_label`, empty when the finding is about a whole job or user.
    - `evidence`: JSON-serializable numbers that triggered the rule, plus `samples`: a reference to
      the rows behind them (table, host, GPUs, time range) so a reader can pull them up.
    - `wasted_gpu_hours`: the part of the allocated GPU-hours the fix would return (conservative);
      `estimate_method` says how it was computed, in words a user can check.
    - `bucket_start`: the identity bucket (the analysis window's aligned start); defaults to
      `window_start`. `scope`: an extra identity discriminator (a trace id, a rank), usually empty.
    """

    rule_id: str
    severity: Severity
    job_id: str | None
    host: str | None
    gpus: tuple[str, ...]
    window_start: datetime
    window_end: datetime
    title: str
    recommendation: str
    wasted_gpu_hours: float
    estimate_method: str
    evidence: Mapping[str, Any] = field(default_factory=dict)
    user: str | None = None
    team: str | None = None
    job_name: str | None = None
    bucket_start: datetime | None = None
    scope: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "severity", Severity(self.severity))
        object.__setattr__(self, "gpus", tuple(sorted(self.gpus)))
        object.__setattr__(self, "window_start", _utc(self.window_start))
        object.__setattr__(self, "window_end", _utc(self.window_end))
        if self.bucket_start is not None:
            object.__setattr__(self, "bucket_start", _utc(self.bucket_start))
        if self.window_end < self.window_start:
            raise ValueError(f"{self.rule_id}: window ends before it starts")
        if not math.isfinite(self.wasted_gpu_hours) or self.wasted_gpu_hours < 0:
            raise ValueError(f"{self.rule_id}: wasted_gpu_hours must be finite and >= 0")

    @property
    def finding_id(self) -> str:
        bucket = self.bucket_start if self.bucket_start is not None else self.window_start
        return finding_id(self.rule_id, self.job_id, self.host, self.gpus, bucket, self.scope)

    def with_job_info(self, *, user: str | None, team: str | None, job_name: str | None) -> Finding:
        """A copy carrying the job's owner as the job catalog knows it."""
        return dataclasses.replace(self, user=user, team=team, job_name=job_name)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (times as ISO 8601 UTC); `from_dict` reads it back exactly."""
        out: dict[str, Any] = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out["severity"] = str(self.severity)
        out["gpus"] = list(self.gpus)
        out["evidence"] = dict(self.evidence)
        for name in ("window_start", "window_end", "bucket_start"):
            value = out[name]
            out[name] = value.isoformat() if value is not None else None
        out["finding_id"] = self.finding_id
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Finding:
        names = {f.name for f in dataclasses.fields(cls)}
        kwargs = {k: v for k, v in data.items() if k in names}
        for name in ("window_start", "window_end", "bucket_start"):
            if kwargs.get(name) is not None:
                kwargs[name] = datetime.fromisoformat(kwargs[name])
        kwargs["gpus"] = tuple(kwargs.get("gpus", ()))
        kwargs["evidence"] = dict(kwargs.get("evidence", {}))
        return cls(**kwargs)
