"""The simulator's scheduler hook and the real ingest server agree on the job records.

Each side's own tests use its own picture of the other (the hook a recording server, ingest
hand-written records); this one posts the simulator's records through `JobHook` to the real
`/v1/jobs` and reads them back from the catalog, so the two cannot drift apart again.
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import select

from fleetscope.settings import load_settings
from simulator.fleet import FleetSpec
from simulator.hooks import JobHook
from simulator.sim import FleetSimulator
from warehouse.catalog.fleet import jobs as jobs_table
from warehouse.ingest.runtime import Server

T0 = 1_767_571_200  # 2026-01-05T00:00:00Z


def test_job_records_from_the_simulator_land_in_the_catalog(tmp_path: Path) -> None:
    sim = FleetSimulator(FleetSpec(hosts=6, seed=11), origin_s=T0, horizon_s=2 * 86_400)
    settings = load_settings(env={}).with_overrides(
        core__data_dir=str(tmp_path / "data"), server__port=0, server__tokens="tok",
        server__plugins="",
    )  # fmt: skip
    server = Server(settings)
    server.start()
    try:
        now = float(T0 + 3600)
        hook = JobHook(sim, lambda: now, server.url, "tok")
        hook.tick()
        with server.catalog.connect() as conn:
            stored = {row.job_id: row for row in conn.execute(select(jobs_table))}
    finally:
        server.stop()
    running = [j for j in sim.fleet.jobs if j.start_s <= now < j.end_s]
    assert running and hook.posted == len(running)
    assert set(stored) == {j.job_id for j in running}
    for job in running:
        row = stored[job.job_id]
        distinct_gpus = {(p.host, u) for p in job.placements for u in p.units}
        assert (row.user, row.team, row.name, row.gpus) == (
            job.user, job.team, job.name, len(distinct_gpus),
        )  # fmt: skip
