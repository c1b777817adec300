"""The dashboard's only write: asking for an on-demand profile of a job, as `fleetscope profile` does.

Through the same call the HTTP API makes (`warehouse.profiling.service.ProfilingService.create`),
so the dashboard's request gets the same checks and errors: a job neither the catalog (jobs, GPU
allocations) nor a recent agent poll kept in the catalog (fleet mode) knows is NotFoundError, and
nothing is written. The agent on the job's host picks the request up on its next poll; the trace
it uploads is analyzed on the server and shows on the job page. Never touches telemetry.
"""

from __future__ import annotations

from fleetscope.settings import Settings

PROFILE_STEPS = 20  # steps recorded per request: a few steady-state iterations, as HTA expects


def request_profile(settings: Settings, job_id: str, steps: int = PROFILE_STEPS) -> int:
    """Create a pending profile request for `job_id` through the profiling service; returns its
    id. NotFoundError (fleetscope.errors) for a job nobody knows."""
    from warehouse.catalog import connect
    from warehouse.fleet.catalog_agent_registry import CatalogAgentRegistry
    from warehouse.profiling.service import ProfilingConfig, ProfilingService
    from warehouse.storage.paths import WarehousePaths

    engine = connect(WarehousePaths.from_settings(settings).catalog_url)
    try:
        service = ProfilingService(
            engine, ProfilingConfig.from_settings(settings), registry=CatalogAgentRegistry(engine)
        )
        return service.create(job_id, steps=steps)
    finally:
        engine.dispose()
