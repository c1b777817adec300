"""A two-day warehouse across an ISO week boundary, with jobs, findings and owners in the catalog.

Sunday 2026-11-15 is the last day of 2026-W46, Monday 2026-11-16 the first of 2026-W47; samples
every 300 s. Truth:

| job   | team   | user  | GPUs     | when            | active | allocated GPU-h |
|-------|--------|-------|----------|-----------------|--------|-----------------|
| a-w46 | vision | alice | e1:0, :1 | Sunday, 24 h    | 0.30   | 48              |
| a-w47 | vision | alice | e1:0, :1 | Monday, 24 h    | 0.80   | 48              |
| b-w47 | nlp    | bob   | e2:0     | Monday, 0-12 h  | 0.00   | 12              |

a-w47's training process reports 10 s steps with FLOPs: 35 % measured MFU on its H100s (bf16).

Findings: W46 R2 on a-w46 (20 GPU-h); W47 R3 and R1 on b-w47 (12 each, the same hours) and P1 on
a-w47 (2).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from simulator.maker.jobs import Fleet, Job, write_segments
from warehouse.catalog import connect
from warehouse.catalog.findings import Finding, upsert_findings
from warehouse.catalog.fleet import Job as CatalogJob
from warehouse.catalog.fleet import upsert_jobs

SUNDAY = datetime(2026, 11, 15, tzinfo=UTC)
MONDAY = SUNDAY + timedelta(days=1)
DAY = 86400
JOBS = (
    Job("a-w46", ("e1",), (0, 1), 0, DAY, 0.3, user="alice", team="vision", name="vit"),
    # its SDK reports 10 s steps of 0.35 x the H100's bf16 peak x 10 s FLOPs: 35 % MFU
    Job(
        "a-w47",
        ("e1",),
        (0, 1),
        DAY,
        2 * DAY,
        0.8,
        user="alice",
        team="vision",
        name="vit",
        step_time_s=10.0,
        flops_per_step=0.35 * 989.5e12 * 10,
    ),
    Job("b-w47", ("e2",), (0,), DAY, DAY + 12 * 3600, 0.0, user="bob", team="nlp", name="nb"),
)


@dataclass(frozen=True)
class ReportWarehouse:
    data_dir: Path

    @property
    def catalog_url(self) -> str:
        return f"sqlite:///{self.data_dir / 'catalog.sqlite'}"

    @property
    def env(self) -> dict[str, str]:
        return {"FLEETSCOPE_CORE_DATA_DIR": str(self.data_dir)}


def _finding(
    fid: str, rule: str, job: str, team: str, user: str, day: datetime, hours: float
) -> Finding:
    return Finding(
        fid, rule, "warn", day, day + timedelta(days=1), hours, job_id=job, user=user, team=team,
        estimate_method=f"{rule} estimate", evidence={"active_pct": 0.0},
        recommendation=f"fix for {rule}",
    )  # fmt: skip


@pytest.fixture(scope="session")
def report_warehouse(tmp_path_factory: pytest.TempPathFactory) -> ReportWarehouse:
    data_dir = tmp_path_factory.mktemp("reports")
    fleet = Fleet(
        clusters={"c": ("e1", "e2")}, gpus_per_host=2, start=SUNDAY, duration_s=2 * DAY,
        interval_s=300, jobs=JOBS,
    )  # fmt: skip
    write_segments(fleet, data_dir / "segments")
    built = ReportWarehouse(data_dir)
    engine = connect(built.catalog_url)
    with engine.begin() as conn:
        upsert_jobs(
            conn, [CatalogJob(j.job_id, user=j.user, team=j.team, name=j.name) for j in JOBS]
        )
        upsert_findings(
            conn,
            [
                _finding("f1", "R2", "a-w46", "vision", "alice", SUNDAY, 20.0),
                _finding("f2", "R3", "b-w47", "nlp", "bob", MONDAY, 12.0),
                _finding("f3", "R1", "b-w47", "nlp", "bob", MONDAY, 12.0),
                _finding("f4", "P1", "a-w47", "vision", "alice", MONDAY, 2.0),
            ],
            run_id="test",
        )
    engine.dispose()
    return built
