"""Reading the sketch store: per sketch key, the coarsest rows inside a range, merged per group.

Both stores (`analyzers.quantiles.store`) attach the same views, sketch_panes and sketch_buckets,
and the table sketch_built (`store_rows.BUILT`: per tier, the time up to which every part of the
store has built it, the earliest of the parts' marks), so one SQL answers from either.

Which rows (`chosen_sql`): per sketch key, the 1 h rows inside the range, the 1 min rows inside it
no used hour covers, the panes no used minute or hour covers; a per-key anti-join. Reading every
finer row of a 7-day range to anti-join it cost seconds: on the 1,000-GPU week 16 M pane and
10.8 M minute rows were read beside the 1.6 M hour rows that cover almost all of them
(bench/RESULTS.md, "Dashboard on the 1,000-GPU week, wave 9"). So a finer tier is read only
where a coarser one may leave a key uncovered (`read_spans`): a unit (an hour, a minute) that
ends before every part's mark of its tier and holds a row of that tier is covered for every key
with finer rows in it, since a part builds a tier's slice for all of its keys at once, from the
samples its finer tiers were built from in the same `keep`. The anti-join would drop every finer
row there, so they are not read. Elsewhere (the range's tail past the marks, units without a
coarse row, a store without marks) the finer rows are read and anti-joined per key as before:
the same rows, so the same merge. One difference, on purpose: a job whose team the catalog
learnt between the two builds has finer rows under another key (team NULL) than its hour row;
the anti-join counted those samples twice, the covered unit counts them once.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from analyzers.accounting.frames import table_exists, ts_literal
from analyzers.quantiles.panes import arrow, merged
from analyzers.quantiles.store_rows import BUCKETS, BUILT, KEYS, PANES, ROLLUPS

if TYPE_CHECKING:
    import duckdb

    from analyzers.sketch.core import QuantileSketch

Span = tuple[datetime, datetime]
MAX_SPANS = 16  # a tier's read spans past this are merged (more rows read, the same chosen)


def _inside(start: datetime, end: datetime, where: str) -> str:
    """Rows of panes lying whole in [start, end) that satisfy `where`; `pane_start < end` lets
    DuckDB skip the Parquet row groups outside."""
    return (
        f"pane_start >= {ts_literal(start)} AND pane_start < {ts_literal(end)} "
        f"AND pane_start + to_seconds(resolution_s) <= {ts_literal(end)} AND ({where})"
    )


def built_until(conn: duckdb.DuckDBPyConnection) -> dict[int, datetime]:
    """Per tier, the time up to which every part of the store has built it (none: no marks)."""
    if not table_exists(conn, BUILT):
        return {}
    rows = arrow(conn, f"SELECT resolution_s, epoch_ms(built_until) AS ms FROM {BUILT}")
    return {
        int(res): datetime.fromtimestamp(ms / 1000, UTC)
        for res, ms in zip(
            rows.column("resolution_s").to_pylist(), rows.column("ms").to_pylist(), strict=True
        )
    }


def read_spans(
    conn: duckdb.DuckDBPyConnection, start: datetime, end: datetime, where: str = "TRUE"
) -> dict[int, list[Span]]:
    """Where each tier's rows are read: the 1 h tier over [start, end); each finer tier over what
    is left once the units of the coarser tiers that are covered for every key are taken out (the
    module's docstring), at most MAX_SPANS spans (the nearest merged)."""
    built = built_until(conn)
    need: list[Span] = [(start, end)] if start < end else []
    spans: dict[int, list[Span]] = {}
    for res in sorted(ROLLUPS, reverse=True):
        spans[res] = need
        until = built.get(res)
        if until is None or not need:
            continue
        covered: list[Span] = []
        for lo, hi in need:
            hi = min(hi, until)
            if lo >= hi:
                continue
            found = arrow(
                conn,
                f"SELECT DISTINCT epoch_ms(pane_start) AS ms FROM {PANES} "
                f"WHERE resolution_s = {int(res)} AND {_inside(lo, hi, where)}",
            )
            for ms in found.column("ms").to_pylist():
                at = datetime.fromtimestamp(ms / 1000, UTC)
                covered.append((at, at + timedelta(seconds=res)))
        need = _merged(_without(need, covered))
    spans[0] = need  # the finest tier: resolution_s below every roll-up
    return spans


def _without(spans: list[Span], holes: list[Span]) -> list[Span]:
    """`spans` minus the union of `holes` (both sorted or not; the result sorted)."""
    out: list[Span] = []
    cuts = sorted(holes)
    for lo, hi in sorted(spans):
        at = lo
        for cut_lo, cut_hi in cuts:
            if cut_hi <= at or cut_lo >= hi:
                continue
            if cut_lo > at:
                out.append((at, cut_lo))
            at = max(at, cut_hi)
            if at >= hi:
                break
        if at < hi:
            out.append((at, hi))
    return out


def _merged(spans: list[Span]) -> list[Span]:
    """Touching spans joined, then the nearest merged until at most MAX_SPANS are left."""
    joined: list[Span] = []
    for lo, hi in spans:
        if joined and lo <= joined[-1][1]:
            joined[-1] = (joined[-1][0], max(hi, joined[-1][1]))
        else:
            joined.append((lo, hi))
    while len(joined) > MAX_SPANS:
        gaps = [joined[i + 1][0] - joined[i][1] for i in range(len(joined) - 1)]
        i = gaps.index(min(gaps))
        joined[i : i + 2] = [(joined[i][0], joined[i + 1][1])]
    return joined


def _hour_of(at: datetime) -> datetime:
    return datetime.fromtimestamp(at.timestamp() // 3600 * 3600, UTC)


def chosen_sql(
    table: str,
    start: datetime,
    end: datetime,
    where: str = "TRUE",
    spans: dict[int, list[Span]] | None = None,
) -> str:
    """Rows of `table` (a store view) for [start, end): per sketch key, the 1 h rows inside the
    range, the 1 min rows inside it no used hour covers, the panes no used minute or hour covers.

    `spans` (`read_spans`): where each tier is read; by default every tier over the whole range.
    """
    whole = [(start, end)] if start < end else []
    spans = spans or {res: whole for res in (*ROLLUPS, 0)}
    hours, minutes = (spans.get(res, whole) for res in sorted(ROLLUPS, reverse=True))
    finer = [
        f"SELECT * FROM {table} WHERE resolution_s = 60 AND {_inside(lo, hi, where)}"
        for lo, hi in minutes
    ] + [
        f"SELECT * FROM {table} WHERE resolution_s < 60 AND {_inside(lo, hi, where)}"
        for lo, hi in spans.get(0, whole)
    ]
    top = [
        f"SELECT * FROM {table} WHERE resolution_s = 3600 AND {_inside(lo, hi, where)}"
        for lo, hi in hours
    ]
    if not finer:
        return " UNION ALL ".join(top) or f"SELECT * FROM {table} WHERE FALSE"
    # the coarse rows that may cover a finer row read: those of its hours
    near = [(_hour_of(lo), hi) for lo, hi in [*minutes, *spans.get(0, whole)]]
    same = " AND ".join(f"x.{k} IS NOT DISTINCT FROM c.{k}" for k in KEYS)

    def cover(res: int) -> str:
        return " UNION ALL ".join(
            f"SELECT {', '.join(KEYS)}, epoch_ms(pane_start) AS at_ms FROM {PANES} "
            f"WHERE resolution_s = {res} AND {_inside(max(lo, start), end, where)} "
            f"AND pane_start < {ts_literal(hi)}"
            for lo, hi in _merged(near)
        )

    chosen = f"""
        SELECT x.* EXCLUDE (hour_ms, minute_ms) FROM (
            SELECT *, epoch_ms(pane_start) // 3600000 * 3600000 AS hour_ms,
                   epoch_ms(pane_start) // 60000 * 60000 AS minute_ms
            FROM ({" UNION ALL ".join(finer)})) x
        ANTI JOIN (SELECT DISTINCT * FROM ({cover(3600)})) c
            ON {same} AND x.hour_ms = c.at_ms
        ANTI JOIN (SELECT DISTINCT * FROM ({cover(60)})) c
            ON {same} AND x.minute_ms = c.at_ms AND x.resolution_s < 60
    """
    return " UNION ALL ".join([*top, chosen])


def group_sketches(
    conn: duckdb.DuckDBPyConnection,
    metric: str,
    keys: Sequence[str],
    start: datetime,
    end: datetime,
    where: str = "TRUE",
) -> dict[tuple[object, ...], QuantileSketch]:
    """One merged sketch per distinct `keys` of `metric`'s rows in [start, end) that satisfy the
    SQL condition `where` (views attached)."""
    where = "metric = '" + metric.replace("'", "''") + f"' AND ({where})"
    spans = read_spans(conn, start, end, where)
    return merged(
        conn,
        chosen_sql(BUCKETS, start, end, where, spans),
        chosen_sql(PANES, start, end, where, spans),
        keys,
    )
