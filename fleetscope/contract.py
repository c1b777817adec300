"""The data contract between the collector and the warehouse: tables, columns, units, wire format.

This is the only thing the collector shares with the server side. Changing a column here is a
schema change: bump `SCHEMA_VERSION` and add a warehouse migration. Units are in the column names.
A server reads every version in `READABLE_SCHEMA_VERSIONS`: a version only adds nullable columns,
so an older agent's batch conforms to the newest schema with those columns null.

Versions: 1, the first; 2 adds step_samples.flops_per_step and compute_dtype (the SDK's model
FLOPs of one step and the dtype they run in: measured MFU, docs/analyzers.md "MFU").

Wire format (agent -> ingest), one HTTP request per batch:

    POST /v1/batches/<table>                    table is a key of TABLES
    Authorization: Bearer <token>
    Content-Type: application/vnd.apache.arrow.stream
    X-Fleetscope-Schema-Version: <SCHEMA_VERSION>
    X-Fleetscope-Batch-Id: <uuid4 hex, chosen by the agent; a retry reuses it>
    X-Fleetscope-Agent: <host name>

    body: one Arrow IPC stream (lz4- or zstd-compressed buffers) whose schema is TABLES[table];
    extra columns are refused, missing nullable columns are filled with nulls.

    202 {"batch_id": ..., "rows": N, "duplicate": false}   stored (or already stored: duplicate true)
    4xx {"error": "<what is wrong>"}                           nothing stored; do not retry as is
    5xx / no answer                                            retry later with the same batch id
"""

from __future__ import annotations

import functools
from typing import Final

import pyarrow as pa

from fleetscope.ipc_budget import BudgetError, decoded_cost, materialized_cost

SCHEMA_VERSION: Final = 2
READABLE_SCHEMA_VERSIONS: Final = frozenset({1, 2})

# What one request body may decode to (buffers) and hold (rows) unless the server says otherwise
# (server.max_decoded_bytes, server.max_batch_rows). An agent's batch is agent.batch_max_rows
# (5,000) rows of about 300 bytes: these leave two orders of magnitude of room.
MAX_DECODED_BYTES: Final = 256 * 1024 * 1024
MAX_BATCH_ROWS: Final = 1_000_000

ARROW_STREAM_MEDIA_TYPE: Final = "application/vnd.apache.arrow.stream"
HEADER_SCHEMA_VERSION: Final = "X-Fleetscope-Schema-Version"
HEADER_BATCH_ID: Final = "X-Fleetscope-Batch-Id"
HEADER_AGENT: Final = "X-Fleetscope-Agent"

TS = pa.timestamp("ms", tz="UTC")
# The timestamps every store can hold: years 0001 to 9999 (Python's datetime, DuckDB's date
# functions and Iceberg's day partitions all work inside it; 2**62 ms overflows DuckDB's
# microseconds). Receivers refuse a sample outside it before answering 2xx (issue 28).
MIN_TS_MS: Final = -62_135_596_800_000  # 0001-01-01T00:00:00Z
MAX_TS_MS: Final = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z

# Unknown exporter fields are kept, not dropped: name -> value for each sample.
EXTRA_FIELDS_TYPE = pa.map_(pa.string(), pa.float64())

GPU_SAMPLES: Final = pa.schema(
    [
        pa.field("ts", TS, nullable=False),
        pa.field("cluster", pa.string()),
        pa.field("host", pa.string(), nullable=False),
        pa.field("gpu_index", pa.int16(), nullable=False),
        pa.field("gpu_uuid", pa.string()),
        pa.field("gpu_model", pa.string()),
        pa.field("mig_profile", pa.string()),  # e.g. "3g.40gb"; null for a whole GPU
        pa.field("mig_instance_id", pa.int16()),  # GPU_I_ID; null for a whole GPU
        pa.field("job_id", pa.string()),  # null: the GPU is not allocated to any job
        pa.field("attribution", pa.string()),  # which source named the job (k8s, hpc_job, ...)
        pa.field("pod", pa.string()),
        pa.field("namespace", pa.string()),
        pa.field("container", pa.string()),
        pa.field("gpu_util", pa.float64()),  # percent 0-100, DCGM_FI_DEV_GPU_UTIL
        pa.field("gr_engine_active", pa.float64()),  # ratio 0-1
        pa.field("sm_active", pa.float64()),  # ratio 0-1
        pa.field("sm_occupancy", pa.float64()),  # ratio 0-1
        pa.field("tensor_active", pa.float64()),  # ratio 0-1
        pa.field("dram_active", pa.float64()),  # ratio 0-1
        pa.field("fp16_active", pa.float64()),  # ratio 0-1
        pa.field("fp32_active", pa.float64()),  # ratio 0-1
        pa.field("fp64_active", pa.float64()),  # ratio 0-1
        pa.field("mem_copy_util", pa.float64()),  # percent 0-100
        pa.field("fb_used_mib", pa.float64()),
        pa.field("fb_free_mib", pa.float64()),
        pa.field("power_w", pa.float64()),
        pa.field("temp_c", pa.float64()),
        pa.field("sm_clock_mhz", pa.float64()),
        pa.field("mem_clock_mhz", pa.float64()),
        pa.field("pcie_tx_bytes_s", pa.float64()),
        pa.field("pcie_rx_bytes_s", pa.float64()),
        pa.field("nvlink_tx_bytes_s", pa.float64()),
        pa.field("nvlink_rx_bytes_s", pa.float64()),
        pa.field("xid_last", pa.float64()),  # last XID error code, 0 for none
        pa.field("ecc_dbe_total", pa.float64()),  # volatile double-bit ECC errors
        pa.field("pcie_replay_total", pa.float64()),
        pa.field("power_violation_us", pa.float64()),  # counter of throttled microseconds
        pa.field("thermal_violation_us", pa.float64()),  # counter of throttled microseconds
        pa.field("clocks_event_reasons", pa.float64()),  # bitmask, DCGM_FI_DEV_CLOCKS_EVENT_REASONS
        pa.field("extra", EXTRA_FIELDS_TYPE),
    ]
)

HOST_SAMPLES: Final = pa.schema(
    [
        pa.field("ts", TS, nullable=False),
        pa.field("cluster", pa.string()),
        pa.field("host", pa.string(), nullable=False),
        pa.field("job_id", pa.string()),  # null: the whole host; else one job's cgroup
        pa.field("cpu_user_pct", pa.float64()),
        pa.field("cpu_system_pct", pa.float64()),
        pa.field("cpu_iowait_pct", pa.float64()),
        pa.field("cpu_cores", pa.float64()),  # what the CPU % are of: host cores, a job's allowed
        pa.field("mem_used_bytes", pa.float64()),
        pa.field("mem_total_bytes", pa.float64()),
        pa.field("net_rx_bytes_s", pa.float64()),
        pa.field("net_tx_bytes_s", pa.float64()),
        pa.field("disk_read_bytes_s", pa.float64()),
        pa.field("disk_write_bytes_s", pa.float64()),
        pa.field("load1", pa.float64()),
    ]
)

STEP_SAMPLES: Final = pa.schema(
    [
        pa.field("ts", TS, nullable=False),  # end of the step
        pa.field("cluster", pa.string()),
        pa.field("host", pa.string(), nullable=False),
        pa.field("job_id", pa.string()),
        pa.field("rank", pa.int32()),
        pa.field("pid", pa.int32()),
        pa.field("step", pa.int64(), nullable=False),
        pa.field("step_time_s", pa.float64(), nullable=False),
        pa.field("data_wait_s", pa.float64()),  # blocked on the DataLoader's next batch
        pa.field("h2d_copy_s", pa.float64()),  # host-to-device copies, where measurable
        pa.field("batch_size", pa.int64()),
        pa.field("samples_per_s", pa.float64()),
        pa.field("dataloader_workers", pa.int32()),
        # schema version 2: one step's model FLOPs on this rank (collector.sdk.flops) and the
        # dtype its matmuls run in (bf16, fp16, tf32, fp8, fp32: analyzers.mfu.peaks)
        pa.field("flops_per_step", pa.float64()),
        pa.field("compute_dtype", pa.string()),
    ]
)

TABLES: Final[dict[str, pa.Schema]] = {
    "gpu_samples": GPU_SAMPLES,
    "host_samples": HOST_SAMPLES,
    "step_samples": STEP_SAMPLES,
}

# Columns that carry measurements (what "values" counts in throughput figures).
VALUE_COLUMNS: Final[dict[str, tuple[str, ...]]] = {
    name: tuple(
        f.name for f in schema if pa.types.is_floating(f.type) or f.name in {"step", "batch_size"}
    )
    for name, schema in TABLES.items()
}


@functools.cache
def _required_columns(table_name: str) -> tuple[int, ...]:
    """Positions of the contract's non-nullable columns in `table_name`'s schema."""
    return tuple(at for at, field in enumerate(TABLES[table_name]) if not field.nullable)


def conform(table_name: str, batch: pa.Table) -> pa.Table:
    """Cast a batch to the contract's schema: add missing nullable columns, refuse unknown ones.

    Raises ContractError naming the offending column, so ingest can answer 400 with it.
    """
    from fleetscope.errors import ContractError

    schema = TABLES.get(table_name)
    if schema is None:
        raise ContractError(f"unknown table {table_name!r}; expected one of {sorted(TABLES)}")
    if batch.schema.equals(schema, check_metadata=True):
        # What an agent sends: the contract's schema exactly. Nothing to add or cast; rebuilding
        # the table column by column was most of this function's cost.
        for required in _required_columns(table_name):
            if batch.column(required).null_count:
                raise ContractError(
                    f"{table_name}.{schema.field(required).name}: nulls in a required column"
                )
        return batch
    # column_names builds a new list on every access (16 us for 40 columns): read it once; the
    # per-field lookups below were 1.4 ms of the server's 3 ms per request (bench/RESULTS.md).
    names = batch.column_names
    unknown = [name for name in names if schema.get_field_index(name) < 0]
    if unknown:
        raise ContractError(f"{table_name}: unknown columns {unknown[:20]}")
    if len(set(names)) != len(names):
        repeated = sorted({name for name in names if names.count(name) > 1})
        raise ContractError(f"{table_name}: columns {repeated} appear more than once")
    index = {name: i for i, name in enumerate(names)}
    columns = []
    for field in schema:
        at = index.get(field.name)
        if at is not None:
            column = batch.column(at)
            if not field.nullable and column.null_count:
                raise ContractError(f"{table_name}.{field.name}: nulls in a required column")
            try:
                columns.append(column if column.type == field.type else column.cast(field.type))
            except pa.ArrowException as exc:
                raise ContractError(
                    f"{table_name}.{field.name}: cannot read {column.type} as {field.type}: {exc}"
                ) from exc
        elif field.nullable:
            columns.append(pa.nulls(batch.num_rows, field.type))
        else:
            raise ContractError(f"{table_name}: required column {field.name!r} is missing")
    return pa.Table.from_arrays(columns, schema=schema)


# Arrow's buffer codec for every client's request body (agent, Prometheus importer, simulator):
# lz4, not zstd. Arrow creates a zstd context for every buffer (~6 us each, ~100 buffers in a
# gpu_samples batch) on both ends: it was two thirds of the agent's sealing (bench/RESULTS.md,
# "Agent against Prometheus's own scrape") and ~0.7 ms of the server's decode per batch ("The
# request path's CPU"); lz4 costs a tenth of that for ~25 % more bytes.
WIRE_CODEC = "lz4"


def to_ipc(batch: pa.Table, compression: str = WIRE_CODEC) -> bytes:
    """Serialize a batch as one compressed Arrow IPC stream (the request body).

    `compression` is Arrow's buffer codec; readers take either (lz4 or zstd)."""
    sink = pa.BufferOutputStream()
    # use_threads=False: a batch is small; handing its ~60 buffers to Arrow's thread pool cost
    # twice the CPU of compressing them in line (bench/RESULTS.md, "Ingest against Prometheus").
    options = pa.ipc.IpcWriteOptions(compression=compression, use_threads=False)
    with pa.ipc.new_stream(sink, batch.schema, options=options) as writer:
        writer.write_table(batch)
    return bytes(sink.getvalue().to_pybytes())


_READ_OPTIONS = pa.ipc.IpcReadOptions(use_threads=False)  # in line: see to_ipc


def from_ipc(
    body: bytes, *, max_decoded_bytes: int = MAX_DECODED_BYTES, max_rows: int = MAX_BATCH_ROWS
) -> pa.Table:
    """Read a request body, fully validated; ContractError on anything else.

    Order matters: the decoded size and row count are checked from the message metadata before
    any buffer is decompressed (fleetscope.ipc_budget), then the stream is decoded and every
    array is validated in full (offsets, dictionary indices, UTF-8, child lengths). Without the
    full validation, bad offsets reached libparquet when the writer sealed a segment and killed
    the server (issue 12). Never raises anything but ContractError for a bad body.
    """
    from fleetscope.errors import ContractError, DecodeBudgetError

    try:
        decoded_cost(body, max_decoded_bytes=max_decoded_bytes, max_rows=max_rows)
        with pa.ipc.open_stream(pa.py_buffer(body), options=_READ_OPTIONS) as reader:
            table = reader.read_all()
        table.validate(full=True)
        materialized_cost(table, max_decoded_bytes=max_decoded_bytes)
    except BudgetError as exc:
        raise DecodeBudgetError(str(exc)) from exc
    except (pa.ArrowException, OSError, ValueError, TypeError, IndexError, KeyError) as exc:
        raise ContractError(f"body is not an Arrow IPC stream: {exc}") from exc
    return table
