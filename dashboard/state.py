"""Streamlit glue: settings, cached connections and cached frames shared by every page.

The telemetry source is the deployment's (`dashboard.source.source_for`: embedded segments or fleet
Iceberg tables, by `server.mode`); pages never ask which. Connections are `st.cache_resource` (one
per warehouse, catalog, source scope and data version: the embedded source has one scope for every
window, the fleet source one per window, read through a pruned scan). The data version
(`TelemetrySource.version`: the segment manifest's identity, one `stat`; a fleet's moves every
`dashboard.cache_ttl_s`) keys the connection and the newest sample, so a page open on unchanged
data re-opens no views and reads nothing before its headline, and newly published data is seen on
the next open (bench/RESULTS.md, "Dashboard first meaningful paint, wave 6"). Frames are
`st.cache_data`, keyed by the warehouse they came from and the window (whose end is the newest
sample), so two warehouses in one process never share a frame. Each query runs on its own DuckDB
cursor: Streamlit serves sessions from several threads.

Must never write telemetry, and never hold anything ingest waits for (readers see sealed files).
"""

from __future__ import annotations

import json
from collections.abc import Hashable
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
import streamlit as st

from dashboard import data, dcgm, jobinfo, opportunities, source, trace_report
from dashboard.time_range import CUSTOM, WINDOWS
from fleetscope.errors import NotFoundError
from fleetscope.settings import Settings, load_settings
from warehouse.profiling.trace_backend import TraceStorage, trace_storage, traces_dir

if TYPE_CHECKING:
    import duckdb
    import sqlalchemy

    from warehouse.catalog.plans import StoredPlan

_TTL_S = load_settings().dashboard.cache_ttl_s
# Telemetry frames of a window that ends at the newest sample (`window`): new data moves the
# window's end (`latest_sample` is read again on every new data version), so the frame's key changes with it,
# and a frame of an unchanged window can be kept longer. On a 7-day window of 1,000 GPUs a frame
# costs longer to compute than _TTL_S on a loaded machine: with the short TTL every reader
# recomputed it (bench/RESULTS.md, "Dashboard first meaningful paint, 7 days x 1,000 GPUs").
_WINDOW_TTL_S = max(_TTL_S, 600.0)


def settings() -> Settings:
    """The effective settings for this run (env `FLEETSCOPE_*`, TOML, defaults)."""
    return load_settings()


def warehouse_key(current: Settings) -> str:
    """What identifies one warehouse + catalog: the settings that locate them."""
    keys = (
        "core.data_dir", "server.mode", "warehouse.segments_dir", "warehouse.catalog_url",
        "fleet.warehouse_uri", "fleet.s3_endpoint", "fleet.namespace",
    )  # fmt: skip
    return json.dumps({k: current.raw(k) for k in keys}, sort_keys=True)  # keys are data here


@st.cache_resource(show_spinner=False)
def _source(key: str) -> source.TelemetrySource:
    return source.source_for(_settings_of(key))


@st.cache_resource(show_spinner=False, max_entries=8)
def _connection(
    key: str, scope: tuple[datetime, ...], version: Hashable
) -> duckdb.DuckDBPyConnection:
    """One connection per data version: re-opened (the views over the manifest's files defined
    again) only when the data changed, not every `dashboard.cache_ttl_s`."""
    return _source(key).connect(scope)


def data_version(key: str) -> Hashable:
    """The token that changes when the warehouse's data may have (`TelemetrySource.version`)."""
    return _source(key).version()


@st.cache_resource(show_spinner=False)
def _catalog(key: str) -> sqlalchemy.Engine:
    return _source(key).catalog_engine()


def _settings_of(key: str) -> Settings:
    overrides = {k.replace(".", "__"): v for k, v in json.loads(key).items()}
    return load_settings().with_overrides(**overrides)


def cursor(
    key: str, start: datetime | None = None, end: datetime | None = None
) -> duckdb.DuckDBPyConnection:
    """A fresh cursor on the cached read-only connection holding [start, end) (one per query).

    Embedded, one connection sees every day and the window is ignored; in fleet mode the window
    is what the pruned scan reads, so every fleet read passes one."""
    return _connection(key, _source(key).scope(start, end), data_version(key)).cursor()


def windowed(key: str) -> bool:
    """Whether reads hold only their window (fleet mode): a job is looked for inside it."""
    return _source(key).windowed


def missing(key: str, start: datetime, end: datetime) -> list[str]:
    """What the deployment lacks for the window (a fleet table not created yet, ...)."""
    return _missing(key, start, end, data_version(key))


@st.cache_data(show_spinner=False, max_entries=32)
def _missing(key: str, start: datetime, end: datetime, version: Hashable) -> list[str]:
    return _source(key).missing(start, end)


def show_missing(key: str, win: data.Window) -> None:
    """Say on the page what the window cannot show, instead of failing on it."""
    for note in missing(key, win.start, win.end):
        st.warning(note, icon=":material/info:")


def no_samples(key: str) -> str:
    return _source(key).no_samples()


def catalog(key: str) -> sqlalchemy.Engine:
    return _catalog(key)


def latest_sample(key: str) -> datetime | None:
    """The newest GPU sample, read once per data version (`data_version`)."""
    return _newest(key, data_version(key))


@st.cache_data(show_spinner=False, max_entries=8)
def _newest(key: str, version: Hashable) -> datetime | None:
    if windowed(key):  # a fleet's connection holds one window: the source asks its tables
        return _source(key).latest_sample()
    return data.latest_sample(cursor(key))  # the embedded one sees every day: no second connection


def window(key: str, label: str) -> data.Window | None:
    """The window called `label` (a key of WINDOWS) ending at the newest sample, or the custom
    UTC range picked in the sidebar (`CUSTOM`, with the link's `from` and `to`)."""
    newest = latest_sample(key)
    if newest is None:
        return None
    if label == CUSTOM:
        return _custom_window(newest)
    return data.aligned(newest + timedelta(milliseconds=1), WINDOWS[label])


def _custom_window(newest: datetime) -> data.Window:
    """A from/to range in UTC from the sidebar (first from the link's `?from=&to=`), defaulting
    to the hour before the newest sample; the range picked is written back into the link."""
    end_default = newest.astimezone(UTC) + timedelta(minutes=1)
    start_default = end_default - timedelta(hours=1)
    start_default = _url_moment("from") or start_default
    end_default = _url_moment("to") or end_default
    for name, moment in (("range_from", start_default), ("range_to", end_default)):
        st.session_state.setdefault(name, moment.replace(second=0, microsecond=0))
    side = st.sidebar
    picked = {}
    for name, words in (("range_from", "from"), ("range_to", "to")):
        kept: datetime = st.session_state[name]
        day = side.date_input(f"{words} (UTC)", kept.date())
        clock = side.time_input(
            f"{words} time (UTC)", kept.time().replace(tzinfo=None), step=timedelta(minutes=5)
        )
        if isinstance(day, date) and isinstance(clock, time):
            kept = datetime.combine(day, clock, tzinfo=UTC)
        picked[name] = st.session_state[name] = kept
    start, end = picked["range_from"], picked["range_to"]
    if end <= start:
        side.warning("The range ends before it starts: showing the hour before its end.")
        start = end - timedelta(hours=1)
    st.query_params["from"] = f"{start:%Y-%m-%dT%H:%MZ}"
    st.query_params["to"] = f"{end:%Y-%m-%dT%H:%MZ}"
    return data.aligned(end, end - start)


def _url_moment(name: str) -> datetime | None:
    """`?from=` / `?to=` of the link: an ISO time (UTC when it names no zone), or None."""
    text = st.query_params.get(name)
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


@st.cache_data(ttl=_WINDOW_TTL_S, show_spinner=False, max_entries=32)
def gpu_buckets(
    key: str,
    start: datetime,
    end: datetime,
    bucket_s: int,
    interval_s: float,
    max_gap_s: float,
    newest: datetime | None = None,
) -> pd.DataFrame:
    """`newest` (the newest sample when read) only keys the cache: a custom range that ends
    after the newest sample is read again once new samples land in it."""
    window = data.Window(start, end, bucket_s=bucket_s)
    return data.gpu_buckets(cursor(key, start, end), window, interval_s, max_gap_s=max_gap_s)


def buckets_for(key: str, win: data.Window) -> pd.DataFrame:
    """The window's accounted buckets, with the accounting settings the analyzers use."""
    current = settings()
    interval_s = current.agent.interval_s
    max_gap_s = current.analyzers.max_gap_s
    newest = latest_sample(key)
    return gpu_buckets(key, win.start, win.end, win.bucket_s, interval_s, max_gap_s, newest)


@st.cache_data(ttl=_WINDOW_TTL_S, show_spinner=False, max_entries=32)
def _totals(
    key: str,
    start: datetime,
    end: datetime,
    bucket_s: int,
    interval_s: float,
    max_gap_s: float,
    newest: datetime | None,
) -> data.FleetTotals:
    window = data.Window(start, end, bucket_s=bucket_s)
    return data.window_totals(cursor(key, start, end), window, interval_s, max_gap_s=max_gap_s)


def totals_for(key: str, win: data.Window) -> data.FleetTotals:
    """The window's fleet totals, `data.fleet_totals(buckets_for(key, win))`, read without the
    buckets (`analyzers.accounting.totals`): the fleet page's headline comes before them."""
    current = settings()
    interval_s, max_gap_s = current.agent.interval_s, current.analyzers.max_gap_s
    newest = latest_sample(key)
    return _totals(key, win.start, win.end, win.bucket_s, interval_s, max_gap_s, newest)


@st.cache_data(ttl=_WINDOW_TTL_S, show_spinner=False, max_entries=32)
def _jobs(
    key: str,
    start: datetime,
    end: datetime,
    bucket_s: int,
    interval_s: float,
    max_gap_s: float,
    newest: datetime | None,
) -> pd.DataFrame:
    buckets = gpu_buckets(key, start, end, bucket_s, interval_s, max_gap_s, newest)
    return data.job_efficiency(buckets, jobs_meta(key))


def jobs_for(key: str, win: data.Window) -> pd.DataFrame:
    """Every job of the window with its efficiency (`data.job_efficiency` of `buckets_for`),
    cached with the buckets: the fleet and jobs pages draw it on every run."""
    current = settings()
    interval_s, max_gap_s = current.agent.interval_s, current.analyzers.max_gap_s
    newest = latest_sample(key)
    return _jobs(key, win.start, win.end, win.bucket_s, interval_s, max_gap_s, newest)


@st.cache_data(ttl=_WINDOW_TTL_S, show_spinner=False, max_entries=32)
def sketch_percentiles(
    key: str, start: datetime, end: datetime, bucket_s: int
) -> pd.DataFrame | None:
    """Fleet percentiles from the analyzers' quantile sketches; None when there are none."""
    from analyzers.quantiles.store import open_store

    store = open_store(_settings_of(key))  # the mode's: the local folder or the fleet's Iceberg
    if not store.has_rows():
        return None
    con = store.connect(start, end)
    try:
        return data.sketch_percentiles(con, data.Window(start, end, bucket_s=bucket_s))
    finally:
        con.close()


@st.cache_data(ttl=_TTL_S, show_spinner=False, max_entries=8)
def stored_percentiles(key: str, window_s: float) -> StoredPlan | None:
    """The scheduled pass's newest fleet percentiles over `window_s` (analyzers.quantiles.stored),
    read again every `_TTL_S`, so percentiles the pass stores show on the next open."""
    from analyzers.quantiles.stored import read_stored

    return read_stored(catalog(key), window_s)


@st.cache_data(ttl=_TTL_S, show_spinner=False)
def jobs_meta(key: str) -> pd.DataFrame:
    return data.jobs_meta(catalog(key))


@st.cache_data(ttl=_TTL_S, show_spinner=False)
def catalog_table(key: str, name: str) -> pd.DataFrame:
    return data.catalog_table(catalog(key), name)


@st.cache_data(ttl=_TTL_S, show_spinner=False)
def opportunity_tables(key: str, start: datetime, end: datetime) -> opportunities.OpportunityTables:
    """`fleetscope opportunities` for the window, with the previous window beside it, and the
    window's costliest findings."""
    return opportunities.tables(catalog(key), start, end)


@st.cache_data(ttl=_TTL_S, show_spinner=False)
def job_findings(key: str, start: datetime, end: datetime) -> pd.DataFrame:
    """Per job: the window's findings and recoverable GPU-hours, as the ranking counts them."""
    return opportunities.per_job(catalog(key), start, end)


@st.cache_data(ttl=_WINDOW_TTL_S, show_spinner=False, max_entries=32)
def sharing_plan(
    key: str, start: datetime, end: datetime, newest: datetime | None = None
) -> dict[str, Any]:
    """`fleetscope plan sharing` over the window, as its JSON plus the table rows; kept as the
    window's frames are (`newest`, the newest sample, only keys the cache). With `_TTL_S` every
    open more than 10 s after the last one computed the plan again: 4-7 s on the 1,000-GPU week
    (bench/RESULTS.md, "Dashboard on the 1,000-GPU week, wave 9")."""
    from analyzers.run.window import Window
    from analyzers.sharing.stored import plan_document

    return plan_document(cursor(key, start, end), Window(start, end))


@st.cache_data(ttl=_TTL_S, show_spinner=False, max_entries=8)
def stored_sharing_plan(key: str, window_s: float) -> StoredPlan | None:
    """The scheduled pass's newest sharing plan over `window_s` (analyzers.sharing.stored), read
    again every `_TTL_S`, so a plan the pass stores shows on the next open."""
    from analyzers.sharing.stored import read_stored

    return read_stored(catalog(key), window_s)


@st.cache_resource(show_spinner=False)
def _trace_storage(key: str) -> TraceStorage:
    return trace_storage(_settings_of(key))


@st.cache_data(ttl=_TTL_S, show_spinner=False)
def traces(key: str) -> pd.DataFrame:
    storage = _trace_storage(key)
    return data.trace_list(catalog_table(key, "traces"), storage, traces_dir(_settings_of(key)))


def trace_file(key: str, trace_id: str, listed_path: str) -> Path:
    """A local file holding the trace: the stored one opened by id through the trace storage
    (fetched from the object store in fleet mode), else the file dropped in the traces folder."""
    try:
        return _trace_storage(key).local_path(trace_id)
    except NotFoundError:
        return Path(listed_path)


@st.cache_data(ttl=_TTL_S, show_spinner=False, max_entries=8)
def stored_trace_view(key: str, trace_id: str) -> trace_report.TraceView | None:
    """The trace page's view of the analysis stored when the trace was uploaded; None while there
    is none (cached for the TTL only, so an analysis that lands later shows on the next run)."""
    document = trace_report.stored_document(catalog(key), trace_id)
    return trace_report.trace_view(document) if document is not None else None


# A job's frames are keyed by the newest sample of the warehouse (`latest_sample`, the job page
# passes it) and kept for _WINDOW_TTL_S: new data changes the key, so a running job's page shows
# it as soon as the short-lived newest sample moves, and a reader within the same data reuses the
# frames. With _TTL_S alone, a job page that took longer than _TTL_S to draw on a loaded machine
# found every frame expired on the next open (bench/RESULTS.md, "Dashboard first meaningful
# paint, wave 5").


@st.cache_data(ttl=_WINDOW_TTL_S, show_spinner=False, max_entries=32)
def job_series(
    key: str,
    job_id: str,
    start: datetime | None = None,
    end: datetime | None = None,
    newest: datetime | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, float | None]]:
    """A job's per-GPU series, its step series and its step totals (empty for an unknown job);
    `newest` only keys the cache."""
    con = cursor(key, start, end)
    hosts = data.job_hosts(con, job_id)
    span = data.job_span(con, job_id, hosts)
    if span is None:
        return pd.DataFrame(), pd.DataFrame(), {}
    return (
        data.job_gpu_series(con, job_id, span, hosts),
        data.job_step_series(con, job_id, span),
        data.job_step_totals(cursor(key, start, end), job_id),
    )


@st.cache_data(ttl=_WINDOW_TTL_S, show_spinner=False, max_entries=32)
def host_health(key: str, start: datetime, end: datetime, bucket_s: int) -> pd.DataFrame:
    return data.host_health(cursor(key, start, end), data.Window(start, end, bucket_s=bucket_s))


@st.cache_data(ttl=_WINDOW_TTL_S, show_spinner=False, max_entries=32)
def hosts_in(key: str, start: datetime, end: datetime, bucket_s: int) -> list[str]:
    return dcgm.hosts_in(cursor(key, start, end), data.Window(start, end, bucket_s=bucket_s))


@st.cache_data(ttl=_WINDOW_TTL_S, show_spinner=False, max_entries=32)
def gpu_panels(
    key: str,
    start: datetime,
    end: datetime,
    bucket_s: int,
    hosts: tuple[str, ...],
    job_id: str | None = None,
) -> pd.DataFrame:
    return dcgm.gpu_panels(
        cursor(key, start, end), data.Window(start, end, bucket_s=bucket_s), list(hosts), job_id
    )


@st.cache_data(ttl=_WINDOW_TTL_S, show_spinner=False, max_entries=32)
def job_footprint(
    key: str,
    job_id: str,
    start: datetime,
    end: datetime,
    hosts: tuple[str, ...],
    scope: tuple[datetime | None, datetime | None] = (None, None),
    newest: datetime | None = None,
) -> dcgm.Footprint | None:
    """The job's footprint over its span [start, end), read from the connection of `scope` (the
    window the job page looked for the job in) where there is one, else of the span."""
    con = cursor(key, *scope) if scope[0] is not None else cursor(key, start, end)
    return dcgm.job_footprint(con, job_id, data.Window(start, end, bucket_s=60), list(hosts))


@st.cache_data(ttl=_WINDOW_TTL_S, show_spinner=False, max_entries=32)
def job_span_hosts(
    key: str,
    job_id: str,
    start: datetime | None = None,
    end: datetime | None = None,
    newest: datetime | None = None,
) -> tuple[data.Window, list[str]] | None:
    """The job's window and hosts: from its GPU samples, else its step metrics (CPU-only)."""
    con = cursor(key, start, end)
    hosts = data.job_hosts(con, job_id)
    span = data.job_span(con, job_id, hosts)
    if span is not None:
        return span, sorted(hosts)
    return jobinfo.step_span(cursor(key, start, end), job_id)


@st.cache_data(ttl=_WINDOW_TTL_S, show_spinner=False, max_entries=32)
def step_series(
    key: str,
    job_id: str,
    start: datetime | None = None,
    end: datetime | None = None,
    newest: datetime | None = None,
) -> tuple[pd.DataFrame, dict[str, float | None]]:
    """A CPU-only job's step series and totals."""
    found = jobinfo.step_span(cursor(key, start, end), job_id)
    if found is None:
        return pd.DataFrame(), {}
    return data.job_step_series(cursor(key, start, end), job_id, found[0]), data.job_step_totals(
        cursor(key, start, end), job_id
    )


@st.cache_data(ttl=_WINDOW_TTL_S, show_spinner=False, max_entries=32)
def host_load(key: str, start: datetime, end: datetime, bucket_s: int) -> pd.DataFrame:
    """The hosts' CPU busy %, load and memory over the window (`dashboard.nodes`)."""
    from dashboard import nodes

    return nodes.host_load(cursor(key, start, end), data.Window(start, end, bucket_s=bucket_s))


@st.cache_data(ttl=_WINDOW_TTL_S, show_spinner=False, max_entries=32)
def job_summary(
    key: str,
    job_id: str,
    start: datetime | None = None,
    end: datetime | None = None,
    newest: datetime | None = None,
    team: str | None = None,
    prices: Any = None,
) -> Any:
    """`fleetscope job`'s summary of the job (`analyzers.reports.job.summarize`, given the CLI's
    `prices` and the job's `team`): the job page's headline numbers, energy, money and MFU
    included, are the CLI's. The prices key the cache, so a price changed in the settings shows
    on the next open. None for a job without GPU samples."""
    from analyzers.reports.job import summarize

    try:
        return summarize(cursor(key, start, end), job_id, prices, team)
    except NotFoundError:
        return None
