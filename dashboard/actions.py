"""The dashboard's only write: asking for an on-demand profile of a job, as `fleetscope profile` does.

A request is a row in the catalog's `profile_requests` table (`warehouse.catalog.profiling`),
which the agent on the job's host picks up and hands to the training process's SDK; the trace it
uploads lands in `traces` and shows on the job page. Never touches telemetry.
"""

from __future__ import annotations

from fleetscope.settings import Settings

PROFILE_STEPS = 20  # steps recorded per request: a few steady-state iterations, as HTA expects


def request_profile(settings: Settings, job_id: str, steps: int = PROFILE_STEPS) -> int:
    """Record a pending profile request for `job_id`; returns the request id."""
    from warehouse.catalog import connect
    from warehouse.catalog.profiling import create_profile_request
    from warehouse.paths import WarehousePaths

    engine = connect(WarehousePaths.from_settings(settings).catalog_url)
    try:
        with engine.begin() as conn:
            return create_profile_request(conn, job_id, steps=steps)
    finally:
        engine.dispose()
