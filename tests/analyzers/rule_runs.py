"""Running one analyzer over a crafted fleet (`simulator.maker.series`) for a day from T0."""

from __future__ import annotations

from datetime import timedelta

from analyzers.base import Analyzer, JobCatalog, StaticJobCatalog
from analyzers.findings import Finding
from analyzers.run.window import Window
from simulator.maker.series import T0, Fleet

DAY = Window(T0, T0 + timedelta(days=1))


def run(analyzer: Analyzer, fleet: Fleet, catalog: JobCatalog | None = None) -> list[Finding]:
    conn = fleet.connect()
    try:
        found = analyzer.run(conn, DAY, catalog or StaticJobCatalog())
    finally:
        conn.close()
    for f in found:
        assert f.rule_id in analyzer.rule_ids
    return sorted(found, key=lambda f: (f.rule_id, f.job_id or "", f.host or ""))
