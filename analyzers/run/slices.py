"""A scheduled window read in slices of whole hosts, so that memory follows a slice, not the fleet.

Why (issue 27): one analyzer pass over a freshly written week of 1,000 GPUs peaked at 11.1 GiB,
because each day's window held the frames of every GPU at once. No rule needs that: a rule judges
one job or one host (`Analyzer.partition_by`), and the one fleet-wide rule combines per-part rows
(`CombinedAnalyzer`, as fleet mode's clusters already do). So a window is cut into slices of
whole hosts such that every job's rows are in one slice:

1. Hosts are joined when one job ran on both, at any time before the window's end (a rule may
   look back before the window: R5 counts a job's GPU-hours of the past week), and these
   connected components are packed, in host order, into slices of at most `analyzers.slice_gpus`
   GPUs (a component larger than that is a slice of its own).
2. Each slice is read through a cursor on the same database in which gpu_samples, host_samples
   and step_samples are temporary views of the slice's hosts; the pipeline runs it as a part
   (`Pipeline.run_part`: findings and partial rows, not landed) and the cursor is closed, taking
   the slice's frames with it.
3. The parts land together (`Pipeline.land_parts`): per-job and per-host findings concatenated,
   the fleet-wide ones combined, symptoms folded into causes across all of them, stored by
   stable id: the same findings as one read of the window (tests/analyzers/test_slices.py).

The quantile sketches are stored once for the whole window, with the window's marks, but built
per slice: the store builds an hour at a time, each hour's panes slice by slice on the slices'
cursors (every pane's key holds its host, so the concatenation is the one build's panes; small
hours and slices together, up to `store_rows.BATCH_VALUES` values a build), so
DuckDB's working set follows a slice, not the fleet (issue 27: the build over all 1,000 GPUs
was the pass's peak, 2.4-2.6 GiB against 2.1 GiB for the rules' slices). A window of one slice runs as it always
did (`Pipeline.run`). This module must never write telemetry nor choose windows.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from analyzers.accounting.frames import ts_literal
from analyzers.run.parts import Part

if TYPE_CHECKING:
    import duckdb

    from analyzers.base import JobCatalog
    from analyzers.run.results import FindingStore
    from analyzers.run.runner import Pipeline, WindowResult
    from analyzers.run.window import Window

SLICED_TABLES = ("gpu_samples", "host_samples", "step_samples")


def host_slices(
    conn: duckdb.DuckDBPyConnection, window: Window, slice_gpus: int
) -> list[list[str]]:
    """The window's hosts in slices of at most `slice_gpus` GPUs, no job's hosts split (module
    docstring); hosts in host order within and across slices."""
    end = ts_literal(window.end)
    start = ts_literal(window.start)
    pairs = conn.execute(
        " UNION ".join(
            f"SELECT DISTINCT host, job_id FROM {table} WHERE ts < {end} AND job_id IS NOT NULL"
            for table in SLICED_TABLES
        )
    ).fetchall()
    gpus = dict(
        conn.execute(
            "SELECT host, count(DISTINCT (gpu_index, mig_instance_id)) FROM gpu_samples"
            f" WHERE ts >= {start} AND ts < {end} GROUP BY host"
        ).fetchall()
    )
    present = {
        str(h)
        for table in SLICED_TABLES
        for (h,) in conn.execute(
            f"SELECT DISTINCT host FROM {table} WHERE ts >= {start} AND ts < {end}"
        ).fetchall()
    }
    components = _components((str(h), str(j)) for h, j in pairs)
    groups: dict[str, list[str]] = {}
    for host in sorted(present):
        groups.setdefault(components.get(host, host), []).append(host)
    slices: list[list[str]] = []
    size = 0
    for members in sorted(groups.values()):
        weight = sum(int(gpus.get(h, 0)) for h in members)
        if not slices or size + weight > slice_gpus:
            slices.append([])
            size = 0
        slices[-1].extend(members)
        size += weight
    return [s for s in slices if s]


def _components(pairs: Iterable[tuple[str, str]]) -> dict[str, str]:
    """Each host's component root, hosts joined through the jobs they share (union-find)."""
    parent: dict[str, str] = {}

    def root(x: str) -> str:
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for host, job in pairs:
        a, b = root(host), root("\0job:" + job)
        if a != b:
            parent[max(a, b)] = min(a, b)
    return {x: root(x) for x in parent if not x.startswith("\0job:")}


def slice_cursor(
    conn: duckdb.DuckDBPyConnection, hosts: Sequence[str]
) -> duckdb.DuckDBPyConnection:
    """A cursor on `conn`'s database in which the contract tables hold `hosts`' rows only."""
    database = conn.execute("SELECT current_database()").fetchall()[0][0]
    listed = ", ".join("'" + h.replace("'", "''") + "'" for h in hosts)
    cursor = conn.cursor()
    cursor.execute("SET TimeZone = 'UTC'")
    for table in SLICED_TABLES:
        source = f'"{database}".main.{table}'
        cursor.execute(
            f"CREATE TEMP VIEW {table} AS SELECT * FROM {source} WHERE host IN ({listed})"
        )
    return cursor


def run_sliced(
    pipeline: Pipeline,
    conn: duckdb.DuckDBPyConnection,
    window: Window,
    catalog: JobCatalog,
    store: FindingStore | None,
    slices: Sequence[Sequence[str]],
) -> WindowResult:
    """Run the pipeline on each slice as a part, then land every part at once."""
    parts: list[Part] = []
    for hosts in slices:
        cursor = slice_cursor(conn, hosts)
        try:
            label = f"hosts {hosts[0]}..{hosts[-1]}" if len(hosts) > 1 else f"host {hosts[0]}"
            parts.append(pipeline.run_part(cursor, window, catalog, label, keep_sketches=False))
        finally:
            cursor.close()
    kept = pipeline.kept_sketches(conn, window, catalog, slices)
    result = pipeline.land_parts(parts, window, catalog, store)
    result.errors.update(kept.errors)
    result.seconds.update(kept.seconds)
    return result
