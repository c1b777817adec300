"""A small warehouse with known truth, shared by the dashboard's tests.

Two clusters, three hosts of two GPUs, two hours at 60 s (720 GPU samples), published as real
warehouse segments, with a real catalog (jobs, findings) and a real Kineto trace. The truth:

| job      | GPUs                  | time       | active | SM   | allocated GPU-h | active GPU-h |
|----------|-----------------------|------------|--------|------|-----------------|--------------|
| train-ok | e1:0, e1:1            | 0-120 min  | 0.90   | 0.70 | 4.0             | 3.6          |
| idle-1   | e2:0                  | 0-60 min   | 0.00   | 0.00 | 1.0             | 0.0          |
| stall-1  | e2:1, w1:0            | 30-120 min | 0.45   | 0.30 | 3.0             | 1.35         |

train-ok's SDK reports its FLOPs per 10 s step: 45 % measured MFU on its H100s (bf16, one rank).
w1:1 is never allocated. w1:0 reports XID 79 and 2 ECC double-bit errors from minute 60.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import Engine

from analyzers.sharing.stored import PlanStep, store_due_plan
from simulator.maker.jobs import Fault, Fleet, Job, write_segments
from simulator.maker.tables import publish
from tests.analyzers.test_sharing import _known_fleet
from warehouse.catalog import connect
from warehouse.catalog.findings import Finding, upsert_findings
from warehouse.catalog.fleet import Job as CatalogJob
from warehouse.catalog.fleet import upsert_jobs
from warehouse.read.reader import open_segments

DATA = Path(__file__).parent / "data"
TRACE = DATA / "mi250_minitoy_train_ROCm6_2_kineto.json.gz"
START = datetime(2026, 11, 16, 8, 0, tzinfo=UTC)

JOBS = (
    Job("train-ok", ("e1",), (0, 1), 0, 7200, 0.9, sm_active=0.7, tensor_active=0.4,
        step_time_s=10.0, data_wait_share=0.02, user="alice", team="vision", name="resnet",
        flops_per_step=0.45 * 989.5e12 * 10),
    Job("idle-1", ("e2",), (0,), 0, 3600, 0.0, sm_active=0.0, tensor_active=0.0,
        user="bob", team="nlp", name="notebook"),
    Job("stall-1", ("e2", "w1"), (1, 0), 1800, 7200, 0.45, sm_active=0.3, tensor_active=0.1,
        step_time_s=20.0, data_wait_share=0.4, user="carol", team="nlp", name="bert"),
)  # fmt: skip


@dataclass(frozen=True)
class Warehouse:
    data_dir: Path
    fleet: Fleet

    @property
    def env(self) -> dict[str, str]:
        return {"FLEETSCOPE_CORE_DATA_DIR": str(self.data_dir)}


def known_fleet() -> Fleet:
    stall = JOBS[2]
    # stall-1 holds GPU 1 of e2 and GPU 0 of w1: two Job rows with the same id, one per host.
    jobs = (
        JOBS[0],
        JOBS[1],
        Job(**{**stall.__dict__, "hosts": ("e2",), "gpu_indices": (1,)}),
        Job(**{**stall.__dict__, "hosts": ("w1",), "gpu_indices": (0,), "step_time_s": None}),
    )
    return Fleet(
        clusters={"east": ("e1", "e2"), "west": ("w1",)},
        gpus_per_host=2,
        start=START,
        duration_s=7200,
        interval_s=60,
        jobs=jobs,
        faults=(Fault("w1", 0, 3600, xid=79, ecc_dbe=2),),
    )


def build_warehouse(data_dir: Path) -> Warehouse:
    fleet = known_fleet()
    write_segments(fleet, data_dir / "segments")
    engine = connect(f"sqlite:///{data_dir / 'catalog.sqlite'}")
    write_catalog(engine, data_dir)
    engine.dispose()
    return Warehouse(data_dir, fleet)


def write_catalog(engine: Engine, data_dir: Path) -> None:
    """The fleet's jobs and findings in the catalog `engine`, its trace under `data_dir`."""
    with engine.begin() as conn:
        upsert_jobs(
            conn,
            [CatalogJob(j.job_id, user=j.user, team=j.team, name=j.name) for j in JOBS],
        )
        window_start = START
        upsert_findings(
            conn,
            [
                Finding("f-stall", "P1", "warn", window_start, START + timedelta(hours=2), 1.2,
                        job_id="stall-1", user="carol", team="nlp",
                        estimate_method="data-wait share x GPU-hours",
                        evidence={"data_wait_pct": 40.0, "_meta": {
                            "title": "stall-1 waits on its DataLoader 40 % of each step"}},
                        recommendation="Raise DataLoader num_workers and pin memory."),
                Finding("f-idle", "R3", "critical", window_start, START + timedelta(hours=1), 1.0,
                        job_id="idle-1", user="bob", team="nlp",
                        estimate_method="all idle hours", evidence={"idle_min": 60, "_meta": {
                            "title": "idle-1 held its GPU 60 min at 0 % utilization"}},
                        recommendation="Cancel idle allocations."),
                # Last week's: before the 7-day window the pages open on (from START + 1 h - 7 days).
                Finding("f-old", "R3", "warn", START - timedelta(days=8),
                        START - timedelta(days=8) + timedelta(hours=1), 0.5,
                        job_id="old-1", team="nlp", recommendation="Cancel idle allocations."),
            ],
            run_id="test",
        )  # fmt: skip
    traces = data_dir / "traces" / "stall-1"
    traces.mkdir(parents=True)
    shutil.copy(TRACE, traces / "mi250.json.gz")


def upload_trace(built: Warehouse) -> str:
    """stall-1's trace uploaded through the profiling service and analysed by the server's hook,
    exactly as `fleetscope server` does (the worker thread aside: the hook is called here);
    returns its trace id."""
    from types import SimpleNamespace

    from analyzers.traces import service as trace_service
    from fleetscope.settings import load_settings
    from warehouse.profiling.agent_registry import ReportedProcess
    from warehouse.profiling.service import ProfilingConfig, ProfilingService

    settings = load_settings(env=built.env)
    engine = connect(f"sqlite:///{built.data_dir / 'catalog.sqlite'}")
    service = ProfilingService(engine, ProfilingConfig.from_settings(settings))
    request_id = service.create("stall-1", steps=2)
    service.poll("e2", [ReportedProcess(9, "stall-1", 0)])
    upload = service.receive_trace(request_id, "e2", 9, 0, TRACE.read_bytes())
    trace_service.analyze_upload(SimpleNamespace(profiling=service), upload)
    described = service.describe(request_id)
    assert described["state"] == "done", described
    engine.dispose()
    return str(upload.trace_id)


@pytest.fixture(scope="session")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Warehouse:
    return build_warehouse(tmp_path_factory.mktemp("fleet"))


@pytest.fixture(scope="session")
def warehouse_dashboard(warehouse: Warehouse) -> Iterator[str]:
    """`fleetscope dashboard` serving the session's warehouse, one for the session; its base URL.

    The browser tests on this warehouse only read it, each in a browser of its own (a Streamlit
    session per tab): a server each cost them a start, a first page on cold caches and a stop,
    4-5 s of each test on an idle machine."""
    from tests.dashboard.browser import dashboard_server

    with dashboard_server(warehouse.env) as url:
        yield url


@pytest.fixture
def warehouse_env(warehouse: Warehouse, monkeypatch: pytest.MonkeyPatch) -> Warehouse:
    for name, value in warehouse.env.items():
        monkeypatch.setenv(name, value)
    return warehouse


SHARING_FAR = datetime.fromisoformat("2030-01-01T00:00:00+00:00")  # capped at the newest sample


def planned(data_dir: Path, *, store: bool = True) -> Path:
    """The known fleet of tests/analyzers/test_sharing.py (3 GPUs freed) published under
    `data_dir`, its catalog holding the scheduled pass's stored sharing plan (`store`)."""
    segments = data_dir / "segments"
    publish(_known_fleet(), segments)
    engine = connect(f"sqlite:///{data_dir / 'catalog.sqlite'}")
    if store:
        assert store_due_plan(
            engine, lambda _s, _e: open_segments(segments), SHARING_FAR, PlanStep()
        )
    engine.dispose()
    return data_dir


@pytest.fixture
def planned_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("FLEETSCOPE_CORE_DATA_DIR", str(planned(tmp_path / "var")))
    yield tmp_path / "var"
