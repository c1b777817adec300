"""The fleet percentiles the scheduled pass stores (analyzers.quantiles.stored) are `fleetscope
quantiles active_pct`'s for the stored window, renewed once a step; the Fleet page shows them with
their window without merging a sketch, and merges for a window they do not answer (issue 31).

A busy job's GPU beside two GPUs no job holds, published and backfilled (the sketches kept), as in
test_cli.py's dashboard-and-CLI test; real catalog, real Streamlit (AppTest)."""

from __future__ import annotations

import json
import shutil
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from analyzers.accounting.usage import latest_sample
from analyzers.quantiles import stored as stored_percentiles
from analyzers.quantiles.store import open_store
from analyzers.quantiles.stored import KIND, read_stored, step_of, store_due_percentiles
from app.cli import main
from fleetscope.settings import Settings, load_settings
from simulator.maker.series import Fleet
from simulator.maker.tables import publish
from tests.dashboard.test_dashboard_pages import _app
from warehouse import catalog
from warehouse.catalog.plans import record_plan
from warehouse.read.reader import open_segments

WEEK_S = 7 * 86400.0
FAR = datetime.fromisoformat("2030-01-01T00:00:00+00:00")  # capped at the newest sample


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The warehouse and its kept sketches, no percentiles stored: tests copy it."""
    tmp_path = tmp_path_factory.mktemp("stored_percentiles")
    fleet = Fleet()
    fleet.gpus(None, "h1", range(2), 0, 180, gpu_util=0.0, gr_engine_active=0.0)
    fleet.gpus("busy", "h2", range(1), 0, 180, gr_engine_active=lambda i, t: 0.5 + (i % 41) / 100)
    publish(fleet, tmp_path / "var" / "segments")
    config = tmp_path / "fleetscope.toml"
    config.write_text(f'[core]\ndata_dir = "{tmp_path / "var"}"\n')
    argv = ["--config", str(config), "backfill", "--start", "2025-03-03", "--end", "2025-03-04"]
    assert main(argv) == 0
    return tmp_path / "var"


def _copied(tmp_path: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the module's warehouse (no percentiles stored in it), the dashboard's."""
    copy = tmp_path / "var"
    shutil.copytree(data_dir, copy)
    (tmp_path / "fleetscope.toml").write_text(f'[core]\ndata_dir = "{copy}"\n')
    monkeypatch.setenv("FLEETSCOPE_CORE_DATA_DIR", str(copy))
    return copy


def _settings(data_dir: Path) -> Settings:
    return load_settings(env={"FLEETSCOPE_CORE_DATA_DIR": str(data_dir)})


def _store_due(data_dir: Path, end: datetime = FAR) -> Any:
    settings = _settings(data_dir)
    engine = catalog.connect(f"sqlite:///{data_dir / 'catalog.sqlite'}")
    connect = lambda _s, _e: open_segments(data_dir / "segments")  # noqa: E731
    return store_due_percentiles(engine, open_store(settings), connect, end, step_of(settings))


def _cli_json(data_dir: Path, argv: list[str], capsys: pytest.CaptureFixture[str]) -> Any:
    config = data_dir.parent / "fleetscope.toml"
    capsys.readouterr()
    assert main(["--config", str(config), *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_the_stored_percentiles_are_fleetscope_quantiles_of_their_window(
    tmp_path: Path,
    data_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    data_dir = _copied(tmp_path, data_dir, monkeypatch)
    window = _store_due(data_dir)
    assert window is not None
    newest = latest_sample(open_segments(data_dir / "segments"))
    assert newest is not None and window.end == newest + timedelta(milliseconds=1)
    assert window.end - window.start >= timedelta(days=7)  # the page's alignment: whole hours
    engine = catalog.connect(f"sqlite:///{data_dir / 'catalog.sqlite'}")
    stored = read_stored(engine, WEEK_S)
    assert stored is not None and (stored.window_start, stored.window_end) == (
        window.start,
        window.end,
    )
    length_s = (window.end - window.start).total_seconds()
    argv = ["quantiles", "active_pct", "--end", window.end.isoformat(), "--window", f"{length_s}s"]
    (cli,) = _cli_json(data_dir, [*argv, "--q", "0.5,0.9,0.99"], capsys)["groups"]
    assert stored.document["values"] == [cli["p50"], cli["p90"], cli["p99"]]
    # the busy GPU's kept samples (the newest one's pane is not whole), none of the idle GPUs'
    assert (stored.document["count"], cli["count"]) == (1079, 1079)
    # renewed once a step: the same data end stores nothing new
    assert _store_due(data_dir) is None


def test_the_fleet_page_shows_the_stored_percentiles_without_merging_a_sketch(
    tmp_path: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    copy = _copied(tmp_path, data_dir, monkeypatch)
    assert _store_due(copy) is not None
    stored = read_stored(catalog.connect(f"sqlite:///{copy / 'catalog.sqlite'}"), WEEK_S)
    assert stored is not None

    def never(*_: Any, **__: Any) -> Any:
        raise AssertionError("the page merged sketches")

    monkeypatch.setattr("dashboard.data.sketch_percentiles", never)
    app = _app()
    shown = app.table[0].value
    assert shown["active %"].tolist() == stored.document["values"] == [70.0, 86.0, 90.0]
    caption = next(c.value for c in app.main.caption if c.value.startswith("active % of every"))
    assert caption.endswith(" UTC by the scheduled analyzer pass")
    assert "over 2025-02-24 " in caption and "computed at " in caption


def test_stored_percentiles_of_another_window_are_not_shown_as_this_one(
    tmp_path: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    copy = _copied(tmp_path, data_dir, monkeypatch)
    engine = catalog.connect(f"sqlite:///{copy / 'catalog.sqlite'}")
    end = datetime.fromisoformat("2025-03-03T00:00:00+00:00")  # hours before the newest sample
    document = {"metric": "active_pct", "quantiles": [0.5, 0.9, 0.99], "values": [1.0, 2.0, 3.0]}
    with engine.begin() as conn:
        record_plan(conn, KIND, WEEK_S, end - timedelta(days=7), end, {**document, "count": 1})
    app = _app()
    assert app.table[0].value["active %"].tolist() == [70.0, 86.0, 90.0]  # merged on open
    assert not any("scheduled analyzer pass" in c.value for c in app.main.caption)


def test_no_percentiles_are_stored_when_the_setting_says_none(
    tmp_path: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    copy = _copied(tmp_path, data_dir, monkeypatch)
    monkeypatch.setenv("FLEETSCOPE_ANALYZERS_PERCENTILES_DAYS", "0")
    settings = load_settings()
    assert step_of(settings).days == 0.0
    engine = catalog.connect(f"sqlite:///{copy / 'catalog.sqlite'}")
    assert not stored_percentiles.due(engine, FAR, step_of(settings))


def test_fleetscope_analyze_stores_them_after_its_windows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fleet = Fleet()
    fleet.gpus("busy", "h2", range(1), 0, 180, gr_engine_active=lambda i, t: 0.5 + (i % 41) / 100)
    publish(fleet, tmp_path / "var" / "segments")
    config = tmp_path / "fleetscope.toml"
    config.write_text(f'[core]\ndata_dir = "{tmp_path / "var"}"\n')
    capsys.readouterr()
    assert main(["--config", str(config), "analyze", "--at", "2025-03-03T03:30:00+00:00"]) == 0
    assert "fleet percentiles stored: " in capsys.readouterr().out
    stored = read_stored(
        catalog.connect(f"sqlite:///{tmp_path / 'var' / 'catalog.sqlite'}"), WEEK_S
    )
    assert stored is not None
    length_s = (stored.window_end - stored.window_start).total_seconds()
    argv = ["quantiles", "active_pct", "--end", stored.window_end.isoformat()]
    (cli,) = _cli_json(tmp_path / "var", [*argv, "--window", f"{length_s}s"], capsys)["groups"]
    assert stored.document["values"] == [cli["p50"], cli["p90"], cli["p99"]]


def test_the_embedded_tick_stores_them_after_a_slice_0_window_lands_without_errors(
    tmp_path: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tick's step (`schedule.store_percentiles`): only a window of slice 0 that landed
    without errors moves the percentiles, up to that window's end."""
    from analyzers.run.results import FindingStore
    from analyzers.run.runner import WindowResult
    from analyzers.run.schedule import store_percentiles
    from analyzers.run.window import Window

    copy = _copied(tmp_path, data_dir, monkeypatch)
    settings = _settings(copy)
    store = FindingStore(catalog.connect(f"sqlite:///{copy / 'catalog.sqlite'}"))
    connect = lambda _s, _e: open_segments(copy / "segments")  # noqa: E731
    start = FAR - timedelta(days=1)
    failed = WindowResult(Window(start, FAR), errors={"R1": "boom"})
    other_slice = WindowResult(Window(start, FAR, partition=1, partitions=2))
    assert store_percentiles(store, settings, connect, [failed, other_slice]) is None
    assert read_stored(store.engine, WEEK_S) is None
    landed = WindowResult(Window(start, FAR))
    window = store_percentiles(store, settings, connect, [failed, landed])
    assert window is not None  # up to FAR, capped at the newest sample as a page's window is
    newest = latest_sample(open_segments(copy / "segments"))
    assert newest is not None and window.end == newest + timedelta(milliseconds=1)
    assert read_stored(store.engine, WEEK_S) is not None
