"""`keep` builds only the slices that hold samples (`store_rows.filled_slices`), several in one build
(`store_rows.built_slices`), and what it stores is what building every slice on its own stored: the
same files (table, day, sequence), each with the same rows bit for bit, the same marks, the same
quantile answers. The old path, every slice built alone, is the same `keep` told that every slice
holds rows and that a build takes one slice (`BATCH_VALUES` 0)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from analyzers.quantiles import store_rows
from analyzers.quantiles.store_rows import Span, slice_seconds
from analyzers.quantiles.tiers import QuantileStore, group_sketches
from analyzers.run.window import Window
from simulator.maker.series import T0, Fleet
from warehouse.storage.segments import read_manifest

from .test_store import CATALOG, keep, util

WINDOW = Window(T0, T0 + timedelta(hours=30))  # two UTC days: the hour tier's two day slices
RETENTION = {10: 6 * 3600.0, 60: None, 3600: None}  # 10 s panes: six hours back from the newest


def gappy() -> Fleet:
    """Samples in hours 0-1, a host-only hour 5, hours 7-8 and 25-29 of the window; empty hours
    between them, the day's end among them."""
    fleet = Fleet()
    fleet.gpus("a", "h1", range(2), 0, 90, gpu_util=util)
    fleet.gpus(None, "h3", range(1), 30, 60, gpu_util=0.0)  # unallocated
    fleet.host("h2", 300, 20)  # a host's samples alone fill hour 5
    fleet.gpus("b", "h2", range(1), 420, 100, gpu_util=lambda i, t: 10.0 + i % 3)
    fleet.gpus("a", "h1", range(2), 1500, 290, gpu_util=util)
    fleet.host("h1", 1500, 290, job="a")
    return fleet


def every_slice(_conn: object, _window: Window, res: int, todo: Span) -> dict[int, dict[str, int]]:
    """The old path: every slice of the span is built, whether it holds rows or not (each counted
    as holding one value, so that with `BATCH_VALUES` 0 each is built alone)."""
    return {int(at.timestamp()) // slice_seconds(res): {"": 1} for at, _stop in todo.slices(res)}


def stored(root: Path) -> tuple[dict[str, list[tuple[str, int, list[str]]]], dict[str, str]]:
    """Each tier table's live files in manifest order as (day/sequence, row count, rows), and the
    marks. File names end in a random suffix: the rest of the name is compared. A file's rows are
    compared in a canonical order: the minute and hour tiers come from DuckDB's parallel GROUP BY,
    whose row order differs from run to run of the same code (so do those files' bytes); every
    value of every row must be the same."""
    manifest = read_manifest(root)
    files = {
        table: [
            (
                s.path.rsplit("-", 1)[0],
                s.rows,
                sorted(repr(row) for row in pq.read_table(root / s.path).to_pylist()),
            )
            for s in manifest.live(table)
        ]
        for table in sorted(manifest.tables)
    }
    return files, dict(manifest.marks)


def answers(store: QuantileStore) -> list[tuple[Any, ...]]:
    """Quantiles of every metric, by job and host, over ranges across panes, hours and days."""
    conn = store.connect()
    found: list[tuple[Any, ...]] = []
    ranges = [(0, 30 * 60), (0, 95), (29.5, 430), (61, 1441), (1439, 1800), (419.5, 521)]
    for metric in ("gpu_util_pct", "power_w", "cpu_pct"):
        for lo, hi in ranges:
            groups = group_sketches(
                conn,
                metric,
                ["job_id", "host"],
                T0 + timedelta(minutes=lo),
                T0 + timedelta(minutes=hi),
            )
            for key in sorted(groups, key=repr):
                sketch = groups[key]
                q = sketch.quantiles([0.5, 0.99, 0.999]).tolist()
                found.append((metric, lo, hi, key, q, sketch.to_bytes()))
    conn.close()
    return found


def run(
    root: Path,
    runs: list[tuple[Fleet, Window]],
    old: bool,
    mp: pytest.MonkeyPatch,
    hosts: list[list[str]] | None = None,
    cap: int | None = None,
) -> int:
    """Keep `runs` in a store at `root` by the old path or the new (`hosts`: in those host slices,
    `cap`: at most that many values a build); how many builds there were (of a slice, or of
    several, on one connection or host slice's cursor)."""
    built = 0
    tier_rows = store_rows._tier_rows

    def counted(*args: Any) -> dict[str, pa.Table]:
        nonlocal built
        built += 1
        return tier_rows(*args)

    with mp.context() as m:
        m.setattr(store_rows, "_tier_rows", counted)
        if old:
            m.setattr(store_rows, "filled_slices", every_slice)
            m.setattr(store_rows, "BATCH_VALUES", 0)
        if cap is not None:
            m.setattr(store_rows, "BATCH_VALUES", cap)
        store = QuantileStore(root, retention_s=RETENTION)
        for fleet, window in runs:
            if hosts is None:
                keep(store, fleet, window)
            else:
                conn = fleet.connect()
                try:
                    store.keep(conn, window, CATALOG, hosts=hosts)
                finally:
                    conn.close()
    return built


def test_skipping_empty_slices_stores_the_same_bytes_marks_and_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    old, new = tmp_path / "old", tmp_path / "new"
    fleet = gappy()
    runs = [
        (fleet, Window(T0, T0 + timedelta(hours=3))),  # past the marks: adds
        (fleet, WINDOW),  # adds from the marks on, across the empty hours and the day's end
    ]
    # every slice: 10 s panes from 23:50 (six hours back from the newest sample) in 7 slices,
    # minutes in 3 + 27 hours, hours in 1 + 2 day slices; the slices with rows (10 s in hours
    # 25-29, minutes in hours 0-1, then 5, 7-8 and 25-29, hours in 1 + 2), a few thousand values
    # in all, are built in one build per tier and run: 10 s in 1, minutes in 1 + 1, hours 1 + 1
    old_built = run(old, runs, True, monkeypatch)
    assert (old_built, run(new, runs, False, monkeypatch)) == (7 + 30 + 3, 1 + 2 + 2)
    assert stored(new) == stored(old)
    old_files, marks = stored(old)
    assert marks == {
        "quantiles/0/1/10s": (T0 + timedelta(hours=30)).isoformat(),
        "quantiles/0/1/60s": (T0 + timedelta(hours=30)).isoformat(),
        "quantiles/0/1/3600s": (T0 + timedelta(hours=30)).isoformat(),
    }
    assert sum(rows for _n, rows, _b in old_files["sketch_panes_60s"]) > 0
    assert answers(QuantileStore(new)) == answers(QuantileStore(old))


def test_a_rebuild_over_empty_slices_drops_their_stored_rows_as_every_slice_did(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rebuild replaces the partition's rows of its range: rows stored for hours that hold no
    sample now (hour 5's host, retired since) go whether the slice is built or skipped."""
    old, new = tmp_path / "old", tmp_path / "new"
    before = gappy()
    now = Fleet()  # the same fleet without hour 5's host nor hours 7-8
    now.gpus("a", "h1", range(2), 0, 90, gpu_util=util)
    now.gpus(None, "h3", range(1), 30, 60, gpu_util=0.0)
    now.gpus("a", "h1", range(2), 1500, 290, gpu_util=util)
    now.host("h1", 1500, 290, job="a")
    runs = [
        (before, WINDOW),
        (now, Window(T0, T0 + timedelta(hours=24))),  # behind the marks: a rebuild of day one
        (now, Window(T0 + timedelta(hours=24), T0 + timedelta(hours=30))),  # and of day two
    ]
    run(old, runs, True, monkeypatch)
    run(new, runs, False, monkeypatch)
    assert stored(new) == stored(old)
    new_answers = answers(QuantileStore(new))
    assert new_answers == answers(QuantileStore(old))
    # hour 5's host rows, kept by the first run, went with the rebuild
    run(tmp_path / "first", runs[:1], False, monkeypatch)
    first = answers(QuantileStore(tmp_path / "first"))
    assert [a[3] for a in first if a[0] == "cpu_pct" and a[1] == 29.5] == [(None, "h2")]
    assert [a for a in new_answers if a[0] == "cpu_pct" and a[1] == 29.5] == []


def test_a_window_with_no_sample_builds_nothing_and_moves_the_marks_as_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    old, new = tmp_path / "old", tmp_path / "new"
    fleet = gappy()
    runs = [
        (fleet, Window(T0, T0 + timedelta(hours=2))),
        (fleet, Window(T0, T0 + timedelta(hours=5))),  # hours 2-4: nothing
    ]
    run(old, runs, True, monkeypatch)
    run(new, runs, False, monkeypatch)
    assert stored(new) == stored(old)
    assert stored(new)[1]["quantiles/0/1/60s"] == (T0 + timedelta(hours=5)).isoformat()


def test_slices_and_host_slices_built_together_store_what_one_build_each_stored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Several slices and host slices in one build (`built_slices`): the files, rows and marks of
    one build per slice and host slice (`BATCH_VALUES` 0), whether the cap takes everything (the
    default) or falls within runs. Values (samples x metrics): hour 0 holds 5,040 of h1's two
    GPUs and 1,260 of h3's one (from minute 30), hour 1 2,520 and 1,260, h2's hours 5, 7 and 8
    4,320 in all, each of hours 25-29 5,400; so at 6,000 hour 0's host slices are built apart,
    hour 1's together, h2's three hours in one build, hours 25-29 one by one. (A rebuild takes
    its slices from the same `built_slices`: the tests above.)"""
    fleet = gappy()
    runs = [(fleet, Window(T0, T0 + timedelta(hours=3))), (fleet, WINDOW)]
    hosts = [["h1"], ["h2"], ["h3"]]
    built = {
        cap: run(tmp_path / str(cap), runs, False, monkeypatch, hosts, cap)
        for cap in (0, 6_000, store_rows.BATCH_VALUES)
    }
    # one build per slice and host slice: minutes 2 + 2, hours 2 (hours 0-2), then 10 s 5,
    # minutes 3 + 5, hours 2; at 6,000: 2 + 1, 2, then 5, 1 + 5, 2; the default: one per tier
    assert built == {0: 21, 6_000: 18, store_rows.BATCH_VALUES: 2 + 3}
    one = stored(tmp_path / "0")
    assert stored(tmp_path / "6000") == one
    assert stored(tmp_path / str(store_rows.BATCH_VALUES)) == one
