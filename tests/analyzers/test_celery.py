"""Fleet mode with real parts: Redis (db 15, flushed), two spawned Celery worker processes, a real
warehouse (published segments) and catalog. A worker whose pool process dies mid-task gets the task
again (acks_late + reject_on_worker_lost) and the catalog ends with exactly the findings an
in-process run produces; a beat tick fans windows out per partition and advances watermarks."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from analyzers.base import StaticJobCatalog
from analyzers.run.celery_app import make_app
from analyzers.run.results import FindingStore
from analyzers.run.runner import Pipeline
from analyzers.run.schedule import WATERMARK_KEY
from analyzers.run.window import Window
from fleetscope.settings import load_settings
from simulator.maker.series import T0, Fleet
from simulator.maker.tables import publish
from warehouse import catalog

pytestmark = [pytest.mark.slow, pytest.mark.real_component("redis")]

BROKER = "redis://127.0.0.1:6379/15"
IDLE = {"gpu_util": 0.0, "gr_engine_active": 0.0, "sm_active": 0.0, "tensor_active": 0.0}


def fleet() -> Fleet:
    f = Fleet()
    for n in range(6):
        f.gpus(f"idle{n}", f"h{n}", range(2), 0, 120, **IDLE)
        f.gpus(f"low{n}", f"g{n}", range(1), 0, 120, gpu_util=10.0)
    return f


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    redis = pytest.importorskip("redis")
    try:
        redis.Redis.from_url(BROKER).flushdb()
    except redis.exceptions.ConnectionError:
        pytest.skip("no Redis at 127.0.0.1:6379")
    publish(fleet(), tmp_path / "var" / "segments")
    return {
        **os.environ,
        "FLEETSCOPE_CORE_DATA_DIR": str(tmp_path / "var"),
        "FLEETSCOPE_CELERY_BROKER_URL": BROKER,
        "FLEETSCOPE_ANALYZERS_PARTITIONS": "2",
        "FLEETSCOPE_TEST_CRASH_MARKER": str(tmp_path / "crashed"),
        "PYTHONPATH": os.pathsep.join(
            [str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")]
        ),
    }


@pytest.fixture
def workers(env: dict[str, str], tmp_path: Path) -> Iterator[list[subprocess.Popen[bytes]]]:
    logs = [(tmp_path / f"w{i}.log").open("wb") for i in range(2)]
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "analyzers.run.celery_app",
                "worker",
                "--pool",
                "prefork",
                "--concurrency",
                "1",
                "--hostname",
                f"w{i}@%h",
                "--include",
                "celery_crash_once",
                "--loglevel",
                "WARNING",
            ],
            env=env,
            cwd=Path(__file__).parents[2],
            stdout=logs[i],
            stderr=subprocess.STDOUT,
        )
        for i in range(2)
    ]
    yield procs
    for p in procs:
        p.terminate()
    for p in procs:
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    for log in logs:
        log.close()


def test_a_crashed_worker_task_is_rerun_without_duplicates(
    env: dict[str, str], workers: list[subprocess.Popen[bytes]], tmp_path: Path
) -> None:
    settings = load_settings(env=env)
    producer = make_app(settings)
    window = Window(T0, T0 + timedelta(days=1))
    results = [
        producer.send_task(
            "fleetscope.analyze_window",
            args=[window.start.isoformat(), window.end.isoformat(), p, 2],
        )
        for p in range(2)
    ]
    done = [r.get(timeout=180) for r in results]
    assert (tmp_path / "crashed").exists()  # one pool process did die mid-task
    store = FindingStore(catalog.connect(f"sqlite:///{tmp_path / 'var' / 'catalog.sqlite'}"))
    stored = sorted(s.finding.finding_id for s in store.findings())
    expected = Pipeline.default().run(fleet().connect(), window, StaticJobCatalog()).findings
    assert stored == sorted(f.finding_id for f in expected)
    # idle: R1 and R3; low: R2 only (its R11 profile is a symptom, analyzers.rules.causes)
    assert sum(d["findings"] for d in done) == len(expected) == 6 * 2 + 6 * 1
    for p in range(2):
        assert store.watermark(WATERMARK_KEY, f"{p}/2") == window.end


def test_a_tick_fans_out_windows_per_partition(
    env: dict[str, str], workers: list[subprocess.Popen[bytes]], tmp_path: Path
) -> None:
    producer = make_app(load_settings(env=env))
    tick = T0 + timedelta(hours=3)
    sent = producer.send_task("fleetscope.tick", args=[tick.isoformat()]).get(timeout=180)
    end = (T0 + timedelta(hours=2, minutes=58)).isoformat()
    assert sorted(sent) == [[T0.isoformat(), end, 0, 2], [T0.isoformat(), end, 1, 2]]
    store = FindingStore(catalog.connect(f"sqlite:///{tmp_path / 'var' / 'catalog.sqlite'}"))
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        marks = [store.watermark(WATERMARK_KEY, f"{p}/2") for p in range(2)]
        if all(m is not None and m.isoformat() == end for m in marks):
            break
        time.sleep(0.5)
    else:
        pytest.fail(f"watermarks never reached {end}: {marks}")
    assert len(store.findings()) == 18


def test_a_window_task_stores_the_sharing_plan_and_the_fleet_percentiles(
    env: dict[str, str], workers: list[subprocess.Popen[bytes]], tmp_path: Path
) -> None:
    """Slice 0's window task sends `fleetscope.sharing_plan` and `fleetscope.fleet_percentiles`
    (both due: none is stored), and the catalog ends holding the plan and the percentiles of the
    7 days to just past the newest sample, the percentiles merged from the panes the window task
    kept (the dashboard's `document` of the same sketches)."""
    from analyzers.accounting.usage import latest_sample
    from analyzers.quantiles import stored as stored_percentiles
    from analyzers.quantiles.store import open_store
    from analyzers.sharing.stored import plan_document, plan_window, read_stored
    from tests.analyzers.test_sharing_stored import rounded

    producer = make_app(load_settings(env=env))
    window = Window(T0, T0 + timedelta(days=1))
    args = [window.start.isoformat(), window.end.isoformat(), 0, 2]
    producer.send_task("fleetscope.analyze_window", args=args).get(timeout=180)
    engine = catalog.connect(f"sqlite:///{tmp_path / 'var' / 'catalog.sqlite'}")
    deadline = time.monotonic() + 180
    while (stored := read_stored(engine, 7 * 86400.0)) is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert stored is not None, "no sharing plan stored"
    conn = fleet().connect()
    newest = latest_sample(conn)
    assert newest is not None
    planned = plan_window(newest + timedelta(milliseconds=1), 7 * 86400.0)
    assert (stored.window_start, stored.window_end) == (planned.start, planned.end)
    assert rounded(stored.document) == rounded(plan_document(conn, planned))
    assert stored.document["not_candidates"] == {"too short": 18}
    while (
        percentiles := stored_percentiles.read_stored(engine, 7 * 86400.0)
    ) is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert percentiles is not None, "no fleet percentiles stored"
    assert (percentiles.window_start, percentiles.window_end) == (planned.start, planned.end)
    sketches = open_store(load_settings(env=env)).connect(planned.start, planned.end)
    assert percentiles.document == stored_percentiles.document(sketches, planned)
    assert percentiles.document["count"] > 0
