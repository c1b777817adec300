"""The fleet's hourly roll-up rows (`gpu_samples_1h`) and how late samples merge into them.

A row is, per (hour, cluster, host, GPU index, job): the sample count, and for each column of
`warehouse.read.rollups.ROLLUP_COLUMNS` the mean and max (what the embedded `gpu_samples_1h` has, so
the dashboard and the accounting read both alike) plus the sum and the count of the values that
were not blank (`<column>_sum`, `<column>_n`), and the sum and count of the accounting's
per-sample active fraction (`active_sum`, `active_n`). Those two make a row mergeable: samples of an hour
that arrive after the hour was rolled up (a spool replayed weeks later, an import) join its row
as counts and sums added, maxima maxed, and the mean recomputed as sum / count, so the merged row
is the roll-up of all the hour's samples taken together. Counts and maxima are exact; sums are
added as doubles, exact whenever the values are (sums of binary fractions such as 0.25), else to
the last bits of rounding order, as any parallel sum is. The SQL is `warehouse.read.rollup_merge`'s,
shared with the embedded roll-ups.

Tables rolled up before those columns existed get them by Iceberg schema evolution (`evolve`,
added as optional: old data files read them as null). A row without them is read by the rules of
`warehouse.read.rollup_merge` (`stored_sums`), as the accounting reads it (analyzers.accounting.usage);
from then on it merges as above.

Which raw files a partition's row already holds is recorded in the roll-up table's properties
(`rolled_files`), in the commit that writes the rows: a roll-up re-run (retention died before
its delete) merges nothing twice, and retention deletes exactly the files it rolled up. This
module only computes rows and reads and writes that record; upkeep commits.
"""

from __future__ import annotations

import json
from functools import cache
from typing import TYPE_CHECKING, Final

import duckdb
import pyarrow as pa

from fleetscope.contract import GPU_SAMPLES
from warehouse.read.rollup_merge import MERGE_COLUMNS as MERGE_COLUMNS
from warehouse.read.rollup_merge import raw_usage_stats, usage_merge_sql

if TYPE_CHECKING:
    from datetime import date

    from pyiceberg.table import Table

ROLLUP_1H: Final = "gpu_samples_1h"
ROLLUP_KEY: Final = ("ts", "cluster", "host", "gpu_index", "job_id")
ROLLED_FILES_PREFIX: Final = "fleetscope.rolled-files."  # + "<day>/<cluster>": JSON list of paths


def _run(sql: str, **tables: pa.Table) -> pa.Table:
    conn = duckdb.connect()
    try:
        conn.execute("SET TimeZone = 'UTC'")
        for name, table in tables.items():
            conn.register(name, table)
        return conn.sql(sql).to_arrow_table()
    finally:
        conn.close()


_ORDER: Final = "ORDER BY cluster, ts, host, gpu_index, job_id"  # the table is sorted by ts


def rollup_rows(raw: pa.Table) -> pa.Table:
    """Hourly roll-up of gpu_samples rows (contract schema): one row per (hour, GPU, job)."""
    stats = raw_usage_stats()
    return _run(
        "SELECT date_trunc('hour', ts) AS ts, cluster, host, gpu_index, job_id, "
        f"count(*) AS samples, {stats} FROM raw GROUP BY ALL {_ORDER}",
        raw=raw,
    )


@cache
def rollup_schema() -> pa.Schema:
    """The Arrow schema of a roll-up row, as `rollup_rows` makes it (the table is created so)."""
    return rollup_rows(GPU_SAMPLES.empty_table()).schema


def merge_rows(stored: pa.Table, rolled: pa.Table) -> pa.Table:
    """`stored` rows and `rolled` rows (of samples not in `stored`) as one row per key, each the
    roll-up of both rows' samples; `stored` rows without sums and counts are read as the module
    docstring says."""
    if stored.num_rows == 0:
        return rolled
    return _run(
        usage_merge_sql("stored", "rolled", ROLLUP_KEY, _ORDER),
        stored=stored,
        rolled=rolled,
    )


def evolve(table: Table) -> None:
    """Add the columns a roll-up row has and `table` lacks (a table made before the sums and
    counts existed); old data files read them as null. No commit when nothing is missing."""
    have = set(table.schema().column_names)
    missing = [f for f in rollup_schema() if f.name not in have]
    if missing:
        with table.update_schema() as update:
            update.union_by_name(pa.schema(missing))


def rolled_key(day: date, cluster: str | None) -> str:
    """The property naming a partition's rolled-up files; the cluster JSON-quoted, so rows
    without a cluster (null) and a cluster named "None" or "" keep records of their own."""
    return f"{ROLLED_FILES_PREFIX}{day.isoformat()}/{json.dumps(cluster)}"


def rolled_files(table: Table, day: date, cluster: str | None) -> set[str]:
    """The raw data files whose samples the partition's roll-up rows hold (and that retention
    has not yet been seen to delete)."""
    recorded = table.properties.get(rolled_key(day, cluster))
    return set(json.loads(recorded)) if recorded else set()


def rolled_record(files: set[str]) -> str:
    return json.dumps(sorted(files))
