"""The dashboard in fleet mode (`server.mode = fleet`): the known fleet of conftest.py ingested through
a real fleet gateway (Iceberg tables in moto's S3 server, catalog in PostgreSQL), served by
`fleetscope dashboard` and read in headless Chromium. The Fleet and Job pages show exactly the
numbers the embedded dashboard shows on the same fleet. Then what fleet mode adds: a window read
through a pruned scan, days past raw retention counted from the upkeep's hourly roll-up, and pages
that say what is missing on a fleet whose tables do not exist yet.
"""

from __future__ import annotations

import shutil
import sys
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from streamlit.testing.v1 import AppTest

from dashboard import data, source
from dashboard.cli import settings_env
from dashboard.fleet_source import FleetSource
from fleetscope.errors import ConfigError
from fleetscope.settings import Settings, load_settings
from simulator.maker.batches import gpu_batch
from simulator.maker.jobs import Fleet
from simulator.wire import TEST_TOKEN, post_batch
from tests.dashboard.browser import CHROMIUM, Browser, dashboard_server
from tests.dashboard.conftest import START, Warehouse, known_fleet, write_catalog
from tests.fleet.conftest import fleet_settings, pg_url, s3_endpoint  # noqa: F401 (fixtures)
from warehouse import catalog
from warehouse.fleet import upkeep
from warehouse.fleet.gateway import Gateway

pytestmark = [pytest.mark.real_component("postgres")]

APP = str(Path(__file__).parents[2] / "dashboard" / "app.py")
WEEK = timedelta(days=7)
OLD_DAY = START - timedelta(days=10)  # one batch there: a partition every window here prunes

# The embedded dashboard's numbers for the known fleet (test_dashboard_pages, conftest's table).
FLEET_METRICS = [
    "Allocated 8.00 GPU-h",
    "Active 4.95 GPU-h 61.9 % of allocated",
    "SM-active 3.70 GPU-h 46.2 %",
    "Idle while allocated 3.05 GPU-h",
    "Capacity seen 12.0 GPU-h",
]
JOB_METRICS = [
    "GPUs 2",
    "allocated GPU-h 3.00",
    "active 45.0 %",
    "SM activity 30.0 %",
    "mean step time 20.000 s",
    "data wait of step 40.0 %",
]


def ingest(settings: Settings, fleet: Fleet) -> None:
    """Every row of `fleet` through one gateway's HTTP route and writer, a batch per host and table
    (202 only once committed to Iceberg), plus one batch on OLD_DAY."""
    gateway = Gateway(settings)
    gateway.start()
    try:
        for name, rows in fleet.tables().items():
            for host in sorted(set(rows.column("host").to_pylist())):
                batch = rows.filter(pc.equal(rows.column("host"), host))
                assert post_batch(gateway.url, name, batch, token=TEST_TOKEN).status == 202
        old_ms = int(OLD_DAY.timestamp() * 1000)
        old = gpu_batch("e1", start_ms=old_ms, gpus=2, job_id="old-1", cluster="east")
        assert post_batch(gateway.url, "gpu_samples", old, token=TEST_TOKEN).status == 202
    finally:
        gateway.stop()


@pytest.fixture
def fleet_warehouse(fleet_settings: Settings) -> Settings:  # noqa: F811 (the fixture)
    """The known fleet in fleet mode; its settings."""
    ingest(fleet_settings, known_fleet())
    engine = catalog.connect(fleet_settings.warehouse.catalog_url)
    write_catalog(engine, fleet_settings.path(fleet_settings.core.data_dir))
    engine.dispose()
    return fleet_settings


METRICS_JS = (
    "Array.from(document.querySelectorAll("  # dashboard.headline_tiles: one row, Markdown tiles
    '\'[class*="st-key-fs_tiles"] [data-testid="stMarkdown"]\'))'
    ".map(e => e.innerText.split('\\n').filter(Boolean).join(' '))"
)


@dataclass(frozen=True)
class Page:
    text: str
    metrics: list[str]


def fleet_and_job(url: str, shots: Path, *more: tuple[str, str]) -> dict[str, Page]:
    """The Fleet page of the dashboard at `url`, then a click to job stall-1, then each of `more`
    (url path, text to wait for), each waited for by its text and screenshot under `shots`."""
    pages: dict[str, Page] = {}
    browser = Browser()
    try:

        def read(name: str, *needles: str) -> None:
            text = browser.wait_for_text(*needles)
            pages[name] = Page(text, list(browser.evaluate(METRICS_JS)))
            browser.screenshot(shots / f"{name}.png")

        browser.navigate(url + "/")
        read("fleet", "Capacity seen", "Idlest jobs", "click a row to open")
        browser.click_row(-1, 0)  # the idlest job, stall-1: its row opens it
        read("job", "Job stall-1", "data wait of step", "Findings", "trace stall-1/mi250")
        for path, needle in more:
            browser.navigate(f"{url}/{path}")
            read(path, needle)
    finally:
        browser.close()
    return pages


@pytest.mark.slow
@pytest.mark.real_component("chromium")
@pytest.mark.skipif(shutil.which(CHROMIUM) is None, reason="chromium is not installed")
def test_fleet_and_job_pages_show_the_embedded_numbers_in_fleet_mode(
    warehouse_dashboard: str, fleet_warehouse: Settings, tmp_path: Path
) -> None:
    embedded = fleet_and_job(warehouse_dashboard, tmp_path / "embedded")
    with dashboard_server(settings_env(fleet_warehouse)) as url:
        fleet = fleet_and_job(
            url,
            tmp_path / "fleet",
            ("jobs", "3 of 3 jobs"),  # the job ids are the grid's rows (issue 31)
            ("hosts", "hosts with XID errors"),
        )
    assert fleet["fleet"].metrics == embedded["fleet"].metrics == FLEET_METRICS
    assert fleet["job"].metrics == embedded["job"].metrics
    # the headline first (`fleetscope job`'s numbers); the energy figures (issue 32) follow it
    assert fleet["job"].metrics[: len(JOB_METRICS)] == JOB_METRICS
    assert "6 GPUs · 3 jobs" in fleet["fleet"].text
    for page in ("fleet", "job"):
        assert "Raise DataLoader num_workers" in fleet[page].text  # a finding from PostgreSQL
    assert "Read from 2026-11-09" in fleet["job"].text  # the window the job was looked for in
    assert "no Iceberg table" not in fleet["fleet"].text
    for page in ("fleet", "job", "jobs", "hosts"):
        assert (tmp_path / "fleet" / f"{page}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _window(end: datetime, length: timedelta) -> data.Window:
    return data.aligned(end, length)


def test_a_window_is_read_from_its_own_partitions_only(fleet_warehouse: Settings) -> None:
    src = FleetSource(fleet_warehouse)
    newest = src.latest_sample()
    assert newest == START + timedelta(seconds=7200 - 60)  # from the files' ts bounds alone
    win = _window(newest + timedelta(milliseconds=1), WEEK)
    con = src.connect(src.scope(win.start, win.end))
    scanned = src.last_scans["gpu_samples"]
    table = src.tables.table("gpu_samples")
    days = [task.file.partition[0] for task in table.scan().plan_files()]
    start_day = (START.date() - upkeep.EPOCH_DAY).days
    assert scanned.rows == 720  # the known fleet's samples, not the old day's 20
    assert scanned.files == days.count(start_day) < len(days)
    assert con.sql("SELECT count(*) FROM gpu_samples").fetchall() == [(720,)]
    assert src.missing(win.start, win.end) == []
    month = _window(newest + timedelta(milliseconds=1), timedelta(days=28))
    assert src.missing(month.start, month.end) == [  # past raw retention (14 days), no roll-up
        "No raw samples before 2026-11-06, and the fleet has no hourly roll-up table "
        "fleetscope.gpu_samples_1h yet (fleet upkeep writes it when it drops days past "
        "warehouse.raw_retention_days): older days of this window show nothing."
    ]


def _totals(con: object, win: data.Window, settings: Settings) -> list[str]:
    buckets = data.gpu_buckets(
        con,  # type: ignore[arg-type]
        win,
        settings.agent.interval_s,
        max_gap_s=settings.analyzers.max_gap_s,
    )
    totals = data.fleet_totals(buckets)
    return [
        f"{totals.allocated_h:.2f}",
        f"{totals.active_h:.2f}",
        f"{totals.idle_h:.2f}",
        f"{totals.capacity_h:.2f}",
        f"{totals.gpus} GPUs",
        f"{totals.jobs} jobs",
    ]


def test_days_past_raw_retention_count_from_the_hourly_rollup(
    warehouse: Warehouse, fleet_warehouse: Settings
) -> None:
    settings = fleet_warehouse
    src = FleetSource(settings)
    dropped = upkeep.retention(src.tables, "gpu_samples", 1, START)
    assert [p.day for p in dropped] == [OLD_DAY.date()]
    day = _window(START + timedelta(hours=2), timedelta(days=1))
    assert src.missing(day.start, day.end) == []  # the old day is not in it
    month = _window(START + timedelta(hours=2), timedelta(days=28))
    assert src.missing(month.start, month.end) == []  # hourly buckets: the roll-up counts
    old = _window(OLD_DAY + timedelta(days=1), timedelta(days=2))  # buckets of 5 min
    assert src.missing(old.start, old.end) == [
        "2026-11-06 to 2026-11-06 are kept only as hourly roll-ups (fleetscope.gpu_samples_1h, "
        "raw samples past warehouse.raw_retention_days are dropped): a window of 7 days or more "
        "shows them."
    ]
    dropped = upkeep.retention(src.tables, "gpu_samples", 1, START + timedelta(days=2))
    assert [(p.day, p.cluster) for p in dropped] == [(START.date(), "east"), (START.date(), "west")]
    win = _window(START + timedelta(hours=2), WEEK)
    con = src.connect(src.scope(win.start, win.end))
    assert con.sql("SELECT count(*) FROM gpu_samples").fetchall() == [(0,)]
    embedded = source.connect_segments(warehouse.data_dir / "segments")
    assert _totals(con, win, settings) == _totals(embedded, win, settings)
    assert _totals(con, win, settings) == ["8.00", "4.95", "3.05", "12.00", "6 GPUs", "3 jobs"]


def test_a_fleet_without_tables_says_what_is_missing(
    fleet_settings: Settings,  # noqa: F811 (the fixture)
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    catalog.connect(fleet_settings.warehouse.catalog_url).dispose()  # the catalog, no gateway yet
    for name, value in settings_env(fleet_settings).items():
        monkeypatch.setenv(name, value)
    app = AppTest.from_file(APP, default_timeout=60)
    app.run()
    assert not app.exception, app.exception
    assert app.info[0].value == (
        "The fleet's Iceberg tables (fleetscope, s3://fleetscope-test/warehouse) hold no GPU "
        "samples yet: start gateways (`fleetscope server --mode fleet`) and agents."
    )
    src = FleetSource(fleet_settings)
    win = _window(START, WEEK)
    assert src.missing(win.start, win.end) == [
        f"The fleet has no Iceberg table fleetscope.{name} yet (no gateway has committed a batch "
        "of it): what it would show is empty."
        for name in ("gpu_samples", "host_samples", "step_samples")
    ]
    con = src.connect(src.scope(win.start, win.end))
    assert con.sql("SELECT count(*) FROM gpu_samples").fetchall() == [(0,)]
    assert src.tables.catalog.list_namespaces() == []  # reading created nothing
    assert pa.types.is_timestamp(con.sql("SELECT ts FROM host_samples").to_arrow_table()[0].type)


@pytest.mark.parametrize(
    ("catalog_url", "message"),
    [
        ("", "fleet mode needs warehouse.catalog_url on PostgreSQL"),
        (
            "postgresql+psycopg2://postgres:secret@127.0.0.1:1/nowhere",
            "fleet tables unreachable (catalog 127.0.0.1:1/nowhere, storage ",
        ),
    ],
)
def test_a_wrong_or_unreachable_fleet_is_a_message_on_the_page(
    catalog_url: str, message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = load_settings(env={}).with_overrides(
        core__data_dir=str(tmp_path), server__mode="fleet", warehouse__catalog_url=catalog_url
    )
    for name, value in settings_env(settings).items():
        monkeypatch.setenv(name, value)
    app = AppTest.from_file(APP, default_timeout=60)
    app.run()
    assert not app.exception, app.exception
    assert app.error[0].value.startswith(message)
    assert "secret" not in app.error[0].value


def test_a_dashboard_without_the_fleet_extra_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings = load_settings(env={}).with_overrides(
        server__mode="fleet", warehouse__catalog_url="postgresql+psycopg2://postgres@127.0.0.1:1/x"
    )
    monkeypatch.setitem(sys.modules, "pyiceberg.catalog.sql", None)  # as if not installed
    with pytest.raises(ConfigError, match=r"install the fleet extra .*fleetscope\[fleet\]"):
        FleetSource(settings).latest_sample()
