"""Each job GPU's profile over a long window from the minute roll-up (`gpu_samples_1m`), so the
Sharing page and `fleetscope plan sharing` never scan a week of raw samples (issue 31: the raw
path took 72-76 s on 7 days x 1,000 GPUs).

What the minute rows give, per (job, host, GPU index), and how it differs from the raw path
(`analyzers.sharing.usage`):
- means of utilization, SM and DRAM activity: sum / count of the samples that had the column,
  the raw mean exactly when samples are evenly spaced (the raw path weighs by sample seconds);
- 95th percentiles: of the minutes' maxima, at or above the raw samples' percentile (each
  minute's maximum is at least each of its samples). Not of the minute means: those are at or
  below it (a minute's mean hides its bursts: 0.42 against 0.83 SM for a bursty job of the
  simulator's fleet), so the planner's "busy" test (`max_sm_p95`) would pass jobs that burst
  within minutes and MIG slices would be sized to their minutes, not their bursts: a slowdown the
  plan does not state. With maxima the error is the other way, as with utilization standing in for
  SM activity: a job with rare sub-minute peaks may be called busy or get a larger slice, a GPU
  not freed rather than a job slowed;
- allocated hours: as the raw accounting counts a gap of at most `analyzers.max_gap_s`'s default
  (300 s) as allocated, a minute with samples counts whole and so do the minutes up to the next
  one within that gap; the first and last minute of a run count their samples x the host's
  interval (60 s over its median samples per minute), as they may be partial. Ends known to the
  minute: a job's hours may differ from the raw path's by up to a minute per run of samples;
- idle share: the samples of minutes whose mean utilization is under 10 %, so idle seconds
  inside busy minutes are lost (the planner does not use it; the raw path counts samples);
- max memory: the minutes' maxima, exact;
- GPU model, memory size and MIG: not in the roll-up; read from the raw samples of the window's
  last `TAIL_S` seconds (a GPU not seen then has no model, size 0, so the planner leaves it
  alone as "memory"). A job still on one MIG instance then is named by it ("0/mig1") as the raw
  path names it; MIG instances of one job on one GPU are one row (the roll-up keys by GPU
  index), marked on MIG, so the planner leaves them alone as it leaves each raw one.
Samples after the roll-up's newest minute are read raw, so the profile ends at the window's end.
A minute rolled up in parts (warehouse.read.rollup_delta) is not merged first (that grouping of
10 M rows was half the week's time): sums add alike, it is counted once, and its parts' maxima
stand for its maximum in the percentile, a few minutes a day.
No start-up grace (`analyzers.startup_grace_s`): every minute counts, as with the default of 0.

A run's neighbouring minutes come from one sorted list per (job, host, GPU index), each minute
packed with its samples into one integer (`_PACK`), not from `lag`/`lead` over a window
partitioned by those three columns: that window was half the query's CPU on the week (4.6 M job
minutes: 8 of 16 thread-seconds); with the list the whole query is 1.6-2.9 s against 3.0-5.1 s,
the same rows to 1e-9 (bench/RESULTS.md, "Dashboard on the 1,000-GPU week, wave 9").
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from analyzers.accounting.frames import ts_literal
from analyzers.accounting.sql import DEFAULT_MAX_GAP_S
from warehouse.read.rollup_merge import stored_sums

if TYPE_CHECKING:
    import duckdb

    from analyzers.run.window import Window

MINUTE_TABLE: Final = "gpu_samples_1m"
TAIL_S: Final = 900.0  # raw samples read for each GPU's model, memory size and MIG layout

_PACK: Final = 1_000_000  # a minute row as one integer: its epoch second x _PACK + its samples

_COLUMNS: Final = ("gpu_util", "gr_engine_active", "sm_active", "dram_active")


def rolled_end(conn: duckdb.DuckDBPyConnection, window: Window) -> float | None:
    """End (epoch seconds) of the minute roll-up's newest minute in the window; None when the
    roll-up is absent or holds nothing of the window (then the raw path answers)."""
    names = {r[0] for r in conn.execute("SELECT view_name FROM duckdb_views()").fetchall()}
    names |= {r[0] for r in conn.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    if MINUTE_TABLE not in names:
        return None
    newest = conn.execute(f"""
        SELECT epoch(max(bucket_ts)) FROM {MINUTE_TABLE}
        WHERE bucket_ts >= {ts_literal(window.start)} AND bucket_ts < {ts_literal(window.end)}
    """).fetchall()[0][0]
    return None if newest is None else min(float(newest) + 60.0, window.end.timestamp())


def minute_uses_sql(window: Window, rolled_end_s: float) -> str:
    """Rows in `analyzers.sharing.usage`'s `_use` order, one per (job, host, GPU index)."""
    start, end = ts_literal(window.start), ts_literal(window.end)
    gap = DEFAULT_MAX_GAP_S
    cut = f"to_timestamp({rolled_end_s})"
    tail = f"to_timestamp({min(rolled_end_s, window.end.timestamp()) - TAIL_S})"
    prev_s = f"r[p] // {_PACK} - r[p - 1] // {_PACK}"
    next_s = f"r[p + 1] // {_PACK} - r[p] // {_PACK}"
    maxes = ", ".join(f"{c}_max" for c in _COLUMNS)
    raw_maxes = ", ".join(f"max({c}) AS {c}_max" for c in _COLUMNS)
    plain = ", ".join(f"{c}_sum, {c}_n, {c}_max" for c in _COLUMNS)
    raw_sums = ", ".join(f"sum({c}) AS {c}_sum, count({c}) AS {c}_n" for c in _COLUMNS)
    util = (
        "coalesce(gpu_util_sum / nullif(gpu_util_n, 0),"
        " 100.0 * gr_engine_active_sum / nullif(gr_engine_active_n, 0))"
    )
    return f"""
        WITH parts AS (
            SELECT bucket_ts, host, gpu_index, job_id, samples, {stored_sums(_COLUMNS)},
                   {maxes}, fb_used_mib_max
            FROM {MINUTE_TABLE}
            WHERE bucket_ts >= {start} AND bucket_ts < {cut} AND job_id IS NOT NULL
            UNION ALL BY NAME
            SELECT date_trunc('minute', ts) AS bucket_ts, host, gpu_index, job_id,
                   count(*) AS samples, {raw_sums}, {raw_maxes}, max(fb_used_mib) AS fb_used_mib_max
            FROM gpu_samples
            WHERE ts >= {cut} AND ts < {end} AND job_id IS NOT NULL
            GROUP BY ALL
        ), m AS (
            SELECT bucket_ts, host, gpu_index, job_id, samples, {plain},
                   fb_used_mib_max AS fb_max
            FROM parts
        ), mm AS (
            SELECT *, {util} AS util_m,
                   coalesce(gpu_util_max, 100.0 * gr_engine_active_max) AS util_top,
                   CASE WHEN gpu_util_n > 0 THEN gpu_util_n ELSE gr_engine_active_n END AS util_n
            FROM m
        ), interval AS (
            SELECT host, 60.0 / median(samples) AS interval_s FROM mm GROUP BY host
        ), runs AS (
            SELECT job_id, host, gpu_index,
                   list_sort(list(epoch(bucket_ts)::BIGINT * {_PACK} + samples)) AS r
            FROM mm GROUP BY ALL
        ), covered AS (
            SELECT job_id, host, gpu_index, list_sum(list_transform(
                range(1, len(r) + 1),
                lambda p: CASE WHEN {next_s} = 0 THEN 0.0  -- a minute in parts: the last counts
                               WHEN coalesce({prev_s}, {gap}) > {gap}
                                 OR coalesce({next_s}, {gap}) > {gap}
                               THEN least(60.0, (r[p] % {_PACK}) * interval_s) ELSE 60.0 END
                          + CASE WHEN {next_s} > 60 AND {next_s} <= {gap}
                                 THEN {next_s} - 60 ELSE 0 END
            )) AS covered_s
            FROM runs JOIN interval USING (host)
        ), j AS (
            SELECT job_id, host, gpu_index,
                   sum(util_m * util_n) / nullif(sum(util_n), 0) AS util_mean,
                   quantile_cont(util_top, 0.95) AS util_p95,
                   sum(sm_active_sum) / nullif(sum(sm_active_n), 0) AS sm_mean,
                   quantile_cont(sm_active_max, 0.95) AS sm_p95,
                   sum(dram_active_sum) / nullif(sum(dram_active_n), 0) AS dram_mean,
                   quantile_cont(dram_active_max, 0.95) AS dram_p95,
                   sum(util_n) FILTER (WHERE util_m < 10) / nullif(sum(util_n), 0) AS idle_share,
                   max(fb_max) AS fb_used_max_mib
            FROM mm GROUP BY job_id, host, gpu_index
        ), t AS (
            SELECT host, gpu_index, job_id, gpu_model, mig_instance_id,
                   fb_used_mib + fb_free_mib AS fb_total_mib
            FROM gpu_samples WHERE ts >= {tail} AND ts < {end}
        ), hw AS (
            SELECT host, gpu_index, any_value(gpu_model) AS gpu_model,
                   max(fb_total_mib) FILTER (WHERE mig_instance_id IS NULL) AS fb_total_mib,
                   bool_or(mig_instance_id IS NOT NULL) AS on_mig
            FROM t GROUP BY host, gpu_index
        ), hwj AS (
            SELECT host, gpu_index, job_id, max(fb_total_mib) AS fb_total_mib,
                   CASE WHEN count(DISTINCT mig_instance_id) = 1
                        THEN gpu_index || '/mig' || min(mig_instance_id) END AS mig_gpu
            FROM t WHERE job_id IS NOT NULL GROUP BY host, gpu_index, job_id
        ), n AS (
            SELECT job_id, count(*) AS job_gpus FROM j GROUP BY job_id
        ), named AS (
            SELECT j.*, c.covered_s / 3600.0 AS alloc_h, n.job_gpus, hw.gpu_model, hw.on_mig,
                   coalesce(hwj.fb_total_mib, hw.fb_total_mib) AS fb_total_mib,
                   coalesce(hwj.mig_gpu, CAST(j.gpu_index AS VARCHAR)) AS gpu
            FROM j JOIN covered c USING (job_id, host, gpu_index) JOIN n USING (job_id)
            LEFT JOIN hw USING (host, gpu_index)
            LEFT JOIN hwj USING (host, gpu_index, job_id)
        )
        SELECT job_id, host, gpu, coalesce(gpu_model, ''),
               job_gpus, alloc_h, coalesce(util_mean, 0), coalesce(util_p95, 0),
               coalesce(sm_mean, util_mean / 100.0, 1.0),
               coalesce(sm_p95, util_p95 / 100.0, 1.0),
               coalesce(dram_mean, 0), coalesce(dram_p95, dram_mean, 0),
               coalesce(idle_share, 0), coalesce(fb_used_max_mib, 0),
               coalesce(fb_total_mib, 0), coalesce(on_mig, FALSE)
        FROM named ORDER BY job_id, host, gpu
    """
