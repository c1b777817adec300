"""A window cut in parts, one per cluster (fleet mode), and what a part's task hands back.

Why: in fleet mode no worker reads the whole fleet. A scheduled window is analysed by one task per
cluster holding data for it, each reading only its cluster's rows (its (day, cluster) Iceberg
partitions), and one landing task stores every part's findings together
(`Pipeline.run_part`, `Pipeline.land_parts`). A `Part` is that task's answer, JSON-ready for
Celery: each analyzer's findings, a fleet-wide analyzer's partial rows, errors and seconds.

This module must never read telemetry nor the catalog: it is the parts' data only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final


class Whole:
    """Every cluster of the window: the embedded server's reads, and a part that reads it all."""

    def __repr__(self) -> str:
        return "WHOLE"


WHOLE: Final = Whole()
Scope = str | None | Whole  # one cluster (None: the rows without a cluster), or every cluster


@dataclass
class Part:
    """What one part's analysis found, not landed yet.

    `cluster` is the part's cluster (None: rows without one); `whole` marks the one part that
    reads every cluster, for a fleet-wide analyzer that cannot combine parts.
    """

    cluster: str | None
    whole: bool = False
    findings: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # analyzer -> found
    partials: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # analyzer -> rows
    errors: dict[str, str] = field(default_factory=dict)  # analyzer (or "quantiles") -> error
    seconds: dict[str, float] = field(default_factory=dict)

    def label(self) -> str:
        if self.whole:
            return "all clusters"
        return f"cluster {self.cluster}" if self.cluster is not None else "no cluster"

    def to_dict(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster,
            "whole": self.whole,
            "findings": self.findings,
            "partials": self.partials,
            "errors": self.errors,
            "seconds": {k: round(v, 4) for k, v in self.seconds.items()},
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Part:
        return cls(
            cluster=data["cluster"],
            whole=bool(data["whole"]),
            findings=dict(data["findings"]),
            partials=dict(data["partials"]),
            errors=dict(data["errors"]),
            seconds={k: float(v) for k, v in data["seconds"].items()},
        )
