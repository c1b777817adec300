"""Run analyzers over one window and partition, and land the results in the store.

The one place that turns settings into analyzers and frame parameters, prepares the window's
shared frame once, runs each analyzer, checks it returned only its own rules, folds symptoms into
their root cause across analyzers (analyzers.rules.causes), and hands the findings to
`FindingStore.replace_window` (idempotent: a re-run replaces, never duplicates). An analyzer
that raises is recorded as a failed run and the others still run; the caller decides what a
failure means (the embedded scheduler logs it, a Celery task retries).

This module must never choose windows (analyzers.run.schedule does) nor write telemetry.
"""

from __future__ import annotations

import dataclasses
import logging
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from analyzers.accounting.cost import Prices
from analyzers.accounting.frames import FrameParams, prepare
from analyzers.accounting.recoverable import recoverable
from analyzers.base import (
    Analyzer,
    CombinedAnalyzer,
    JobCatalog,
    load_analyzers,
    load_threshold_overrides,
    lookback_of,
    rule_registry,
)
from analyzers.findings import Finding
from analyzers.rule_cards import relations_of
from analyzers.rules.causes import resolve
from analyzers.run.parts import WHOLE, Part, Scope, Whole
from analyzers.run.window import Window
from fleetscope.errors import FleetscopeError

if TYPE_CHECKING:
    import duckdb

    from analyzers.quantiles.panes import SketchFrame
    from analyzers.quantiles.store import SketchStore
    from analyzers.run.results import FindingStore
    from fleetscope.settings import Settings

log = logging.getLogger(__name__)
A = TypeVar("A")  # who found a list of findings: an analyzer, or its name


class AnalyzerFailedError(FleetscopeError):
    """One or more analyzers raised on a window (named with their errors)."""


@dataclass
class WindowResult:
    window: Window
    findings: list[Finding] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Pipeline:
    """The analyzers and frame parameters a deployment runs, built from settings."""

    analyzers: tuple[Analyzer, ...]
    params: FrameParams
    sketches: SketchStore | None = None  # keeps the window's quantile sketches (issue 6)
    prices: Prices = field(default_factory=Prices)  # recoverable money (none set: no money)
    slice_gpus: int = 0  # more GPUs: the window runs in host slices (analyzers.run.slices)

    @classmethod
    def from_settings(cls, settings: Settings) -> Pipeline:
        enabled = [n.strip() for n in settings.analyzers.enabled.split(",")]
        thresholds_file = settings.analyzers.thresholds_file
        overrides = load_threshold_overrides(
            settings.path(settings.analyzers.thresholds_file) if thresholds_file else None
        )
        gpus_per_node = settings.analyzers.gpus_per_node
        overrides.setdefault("fragmentation", {}).setdefault("gpus_per_node", gpus_per_node)
        names = [n for n in enabled if n]
        if names and "fragmentation" not in names:
            overrides.pop("fragmentation")
        analyzers = load_analyzers(names, overrides)
        rule_registry(analyzers)
        params = FrameParams(
            max_gap_s=settings.analyzers.max_gap_s,
            startup_grace_s=settings.analyzers.startup_grace_s,
            default_interval_s=settings.agent.interval_s,
        )
        from analyzers.quantiles.store import open_store  # the mode's: a folder, or Iceberg

        return cls(
            tuple(analyzers),
            params,
            open_store(settings),
            Prices.from_settings(settings),
            settings.analyzers.slice_gpus,
        )

    @classmethod
    def default(cls) -> Pipeline:
        return cls(tuple(load_analyzers()), FrameParams())

    def run(
        self,
        conn: duckdb.DuckDBPyConnection,
        window: Window,
        catalog: JobCatalog,
        store: FindingStore | None = None,
        cluster: Scope = WHOLE,
    ) -> WindowResult:
        """Run every analyzer on `window`; with a store, land each analyzer's findings there.
        `cluster`: `conn` holds that cluster's rows only (its quantile panes are kept as its).
        A window of more than `slice_gpus` GPUs is read in host slices (analyzers.run.slices)."""
        if self.slice_gpus > 0 and cluster is WHOLE:
            from analyzers.run.slices import host_slices, run_sliced

            slices = host_slices(conn, window, self.slice_gpus)
            if len(slices) > 1:
                return run_sliced(self, conn, window, catalog, store, slices)
        result = WindowResult(window)
        with self._prepared(conn, window, catalog, result, cluster):
            ran: list[tuple[Analyzer, str, list[Finding], float]] = []
            for analyzer in self.analyzers:
                if analyzer.partition_by == "none" and window.partition != 0:
                    continue
                done = self._run_one(analyzer, conn, window, catalog, store, result)
                if done is not None:
                    ran.append((analyzer, *done))
            ran = self._recoverable(ran, conn, window, catalog)
            self._land(ran, window, store, result)
        return result

    def run_part(
        self,
        conn: duckdb.DuckDBPyConnection,
        window: Window,
        catalog: JobCatalog,
        cluster: Scope,
        *,
        keep_sketches: bool = True,
    ) -> Part:
        """One part of a window cut per cluster (fleet mode), `conn` holding only its rows: what
        each analyzer found, not landed (`land_parts` lands every part's at once). A cluster's
        part runs the per-job and per-host analyzers and the fleet-wide ones' `partial`; the
        whole window's part (cluster WHOLE) runs the fleet-wide ones that cannot combine parts.
        `keep_sketches` False (a host slice's part: analyzers.run.slices): the rules' pane frame
        is built, and the window's sketches are kept once, by `kept_sketches`."""
        part = Part(None if isinstance(cluster, Whole) else cluster, whole=cluster is WHOLE)
        result = WindowResult(window)
        # the whole part keeps no sketches: the clusters' parts keep theirs
        found_by: list[tuple[str, str, list[Finding], float]] = []
        with self._prepared(
            conn,
            window,
            catalog,
            result,
            cluster,
            keep_sketches=keep_sketches and not part.whole,
            sketch_frame=not keep_sketches,
        ):
            for analyzer in self.analyzers:
                kind = part_kind(analyzer, window, whole=part.whole)
                if kind is None:
                    continue
                started = time.perf_counter()
                try:
                    if kind == "partial":
                        assert isinstance(analyzer, CombinedAnalyzer)
                        part.partials[analyzer.name] = analyzer.partial(conn, window)
                    else:
                        found = _own(analyzer, analyzer.run(conn, window, catalog))
                        found_by.append((analyzer.name, "", found, 0.0))
                except Exception as exc:  # an analyzer's bug must not stop the others
                    log.error("analyzer %s failed on %s", analyzer.name, window.key(), exc_info=exc)
                    part.errors[analyzer.name] = f"{type(exc).__name__}: {exc}"
                part.seconds[analyzer.name] = time.perf_counter() - started
            for name, _, found, _ in self._recoverable(found_by, conn, window, catalog):
                part.findings[name] = [f.to_dict() for f in found]
        part.errors.update(result.errors)  # the quantile sketches'
        return part

    def land_parts(
        self,
        parts: Sequence[Part],
        window: Window,
        catalog: JobCatalog,
        store: FindingStore | None,
    ) -> WindowResult:
        """Land every part's findings of one window as `run` lands one read's: per analyzer,
        the parts' findings concatenated (a job runs in one cluster, a host is in one) or a
        fleet-wide analyzer's `combine` of the parts' partials; symptoms folded into causes
        across all of them; replaced in the store by stable ids. An analyzer that failed in any
        part fails for the window (landing the other parts' would drop the failed part's
        findings as stale), and a sketch failure is the window's error as in `run`."""
        result = WindowResult(window)
        ran: list[tuple[Analyzer, str, list[Finding], float]] = []
        for analyzer in self.analyzers:
            if analyzer.partition_by == "none" and window.partition != 0:
                continue
            run_id = uuid.uuid4().hex
            if store is not None:
                store.start_run(run_id, analyzer.name, window)
            name = analyzer.name
            try:
                failed = [f"{p.label()}: {p.errors[name]}" for p in parts if name in p.errors]
                if failed:
                    raise AnalyzerFailedError("; ".join(failed))
                if part_kind(analyzer, window, whole=False) == "partial":
                    assert isinstance(analyzer, CombinedAnalyzer)
                    rows = [row for p in parts for row in p.partials.get(name, [])]
                    found = _own(analyzer, analyzer.combine(rows, window, catalog))
                else:
                    found = [Finding.from_dict(d) for p in parts for d in p.findings.get(name, [])]
            except Exception as exc:
                self._failed(analyzer, window, store, result, run_id, exc)
                continue
            ran.append((analyzer, run_id, found, sum(p.seconds.get(name, 0.0) for p in parts)))
        self._land(ran, window, store, result)
        for p in parts:
            if "quantiles" in p.errors:
                result.errors[f"quantiles {p.label()}"] = p.errors["quantiles"]
        return result

    def _recoverable(
        self,
        ran: list[tuple[A, str, list[Finding], float]],
        conn: duckdb.DuckDBPyConnection,
        window: Window,
        catalog: JobCatalog,
    ) -> list[tuple[A, str, list[Finding], float]]:
        """Recoverable kWh and money beside each finding's GPU-hours
        (analyzers.accounting.recoverable), from the telemetry the analyzers read, in one query
        for every analyzer's findings. An estimate that cannot be made loses no finding: they
        land without it, and the log says why."""
        everything = [f for _, _, found, _ in ran for f in found]
        try:
            priced = recoverable(
                everything,
                conn,
                window,
                catalog,
                self.prices,
                default_interval_s=self.params.default_interval_s,
                max_gap_s=self.params.max_gap_s,
            )
        except Exception as exc:
            log.error("recoverable kWh on %s failed", window.key(), exc_info=exc)
            return ran
        out, at = [], 0
        for who, run_id, found, seconds in ran:
            out.append((who, run_id, priced[at : at + len(found)], seconds))
            at += len(found)
        return out

    @contextmanager
    def _prepared(
        self,
        conn: duckdb.DuckDBPyConnection,
        window: Window,
        catalog: JobCatalog,
        result: WindowResult,
        cluster: Scope,
        *,
        keep_sketches: bool = True,
        sketch_frame: bool = False,
    ) -> Iterator[None]:
        """The window's shared frames (and its quantile sketches kept, or with `sketch_frame`
        only the rules' pane frame built at the store's pane length), dropped afterwards."""
        lookback_s = max(self.params.lookback_s, lookback_of(self.analyzers))
        params = dataclasses.replace(self.params, lookback_s=lookback_s)
        frames = [prepare(conn, window, params)]
        if window.partition == 0 and window.partitions > 1:
            frames.append(prepare(conn, Window(window.start, window.end), params))
        panes = None
        try:
            if self.sketches is not None and keep_sketches:
                panes = self._keep_sketches(conn, window, catalog, result, cluster)
            elif self.sketches is not None and sketch_frame:
                from analyzers.quantiles.panes import prepare as prepare_sketches

                panes = prepare_sketches(conn, window, self.sketches.pane_s)
            yield
        finally:
            for frame in frames:
                conn.execute(f"DROP TABLE IF EXISTS {frame.gpu}")
                conn.execute(f"DROP TABLE IF EXISTS {frame.jobgpu}")
            if panes is not None:
                from analyzers.quantiles.panes import drop

                drop(conn, panes)

    def kept_sketches(
        self,
        conn: duckdb.DuckDBPyConnection,
        window: Window,
        catalog: JobCatalog,
        hosts: Sequence[Sequence[str]] = (),
    ) -> WindowResult:
        """Keep the window's quantile sketches without building the rules' pane frame over it
        (a window read in host slices: each slice builds its own frame, and the store builds
        each hour's panes slice by slice); its errors and seconds under "quantiles"."""
        result = WindowResult(window)
        if self.sketches is not None:
            self._keep_sketches(conn, window, catalog, result, WHOLE, frame=False, hosts=hosts)
        return result

    def _keep_sketches(
        self,
        conn: duckdb.DuckDBPyConnection,
        window: Window,
        catalog: JobCatalog,
        result: WindowResult,
        cluster: Scope,
        *,
        frame: bool = True,
        hosts: Sequence[Sequence[str]] = (),
    ) -> SketchFrame | None:
        """Build the window's pane sketches (rules read them; not with `frame` False) and keep
        the new ones; a failure is recorded like an analyzer's (the watermark stays), the rules
        still run."""
        from analyzers.quantiles.panes import prepare as prepare_sketches

        assert self.sketches is not None
        started = time.perf_counter()
        built: SketchFrame | None = None
        try:
            if frame:
                built = prepare_sketches(conn, window, self.sketches.pane_s)
            settled = window.settled_end
            if settled is None:
                self.sketches.keep(conn, window, catalog, cluster, hosts)
            elif settled > window.start:  # a live window: keep only its settled panes
                kept = dataclasses.replace(window, end=settled, settled_end=None)
                self.sketches.keep(conn, kept, catalog, cluster, hosts)
        except Exception as exc:  # like an analyzer's bug: recorded, the rules still run
            log.exception("quantile sketches failed on %s", window.key())
            result.errors["quantiles"] = f"{type(exc).__name__}: {exc}"
            return built
        result.seconds["quantiles"] = time.perf_counter() - started
        return built

    def _run_one(
        self,
        analyzer: Analyzer,
        conn: duckdb.DuckDBPyConnection,
        window: Window,
        catalog: JobCatalog,
        store: FindingStore | None,
        result: WindowResult,
    ) -> tuple[str, list[Finding], float] | None:
        """Run one analyzer; (run id, its findings, seconds), or None when it failed."""
        run_id = uuid.uuid4().hex
        if store is not None:
            store.start_run(run_id, analyzer.name, window)
        started = time.perf_counter()
        try:
            found = _own(analyzer, analyzer.run(conn, window, catalog))
        except Exception as exc:  # an analyzer's bug must not stop the others
            self._failed(analyzer, window, store, result, run_id, exc)
            return None
        return run_id, found, time.perf_counter() - started

    def _land(
        self,
        ran: list[tuple[Analyzer, str, list[Finding], float]],
        window: Window,
        store: FindingStore | None,
        result: WindowResult,
    ) -> None:
        """Fold symptoms into their root causes (analyzers.rules.causes) across all analyzers of the
        window, then land each analyzer's remaining findings (its absorbed ones are removed)."""
        everything = [f for _a, _r, found, _s in ran for f in found]
        roots = {f.finding_id: f for f in resolve(everything, relations_of(a for a, *_ in ran))}
        for analyzer, run_id, found, elapsed in ran:
            mine = [roots[f.finding_id] for f in found if f.finding_id in roots]
            try:
                if store is not None:
                    store.replace_window(
                        mine,
                        rule_ids=analyzer.rule_ids,
                        partition_by=analyzer.partition_by,
                        window=window,
                        run_id=run_id,
                    )
            except Exception as exc:
                self._failed(analyzer, window, store, result, run_id, exc)
                continue
            result.seconds[analyzer.name] = elapsed
            result.findings.extend(mine)
            if store is not None:
                store.finish_run(run_id, findings=len(mine), stats={"seconds": round(elapsed, 4)})

    @staticmethod
    def _failed(
        analyzer: Analyzer,
        window: Window,
        store: FindingStore | None,
        result: WindowResult,
        run_id: str,
        exc: Exception,
    ) -> None:
        log.error("analyzer %s failed on %s", analyzer.name, window.key(), exc_info=exc)
        result.errors[analyzer.name] = f"{type(exc).__name__}: {exc}"
        if store is not None:
            store.finish_run(run_id, error=result.errors[analyzer.name])


def _own(analyzer: Analyzer, found: list[Finding]) -> list[Finding]:
    """`found`, when every finding is of a rule the analyzer implements."""
    foreign = sorted({f.rule_id for f in found} - set(analyzer.rule_ids))
    if foreign:
        raise AnalyzerFailedError(f"{analyzer.name} returned rules it does not own: {foreign}")
    return found


def part_kind(analyzer: Analyzer, window: Window, *, whole: bool) -> str | None:
    """What a part of a window cut per cluster runs of `analyzer`: "run" (its findings),
    "partial" (a fleet-wide analyzer's part, combined at landing) or None (another part's)."""
    if analyzer.partition_by != "none":
        return None if whole else "run"
    if window.partition != 0:
        return None
    if isinstance(analyzer, CombinedAnalyzer):
        return None if whole else "partial"
    return "run" if whole else None
