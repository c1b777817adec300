"""The fleet-mode Iceberg catalog and table layout (standard Iceberg v2, readable as it is).

Why Iceberg through pyiceberg: DuckDB, Trino and Spark read Iceberg v2 tables directly, the
format defines atomic commits with optimistic concurrency (many writers, no coordinator), and
pyiceberg's SQL catalog keeps the table pointers in the PostgreSQL the catalog already uses.

Layout of every contract table (gpu_samples, host_samples, step_samples): the contract's columns,
partitioned by `day(ts)` and `identity(cluster)`, sort order `ts` ascending (writers sort each
file by time). Timestamps are Iceberg `timestamptz` (microseconds); readers cast back to the
contract's Arrow schema. Creation is race-safe: a gateway that loses the race loads the winner's.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from fleetscope.contract import TABLES
from fleetscope.errors import ConfigError

if TYPE_CHECKING:
    from pyarrow.fs import S3FileSystem
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.table import Table

    from fleetscope.settings import Settings

FLUSH_PROPERTY = "fleetscope.flush-id"  # snapshot summary key: which gateway flush committed it


@dataclass(frozen=True)
class FleetConfig:
    catalog_url: str
    warehouse_uri: str
    s3_endpoint: str
    s3_access_key: str
    s3_secret_key: str
    s3_region: str
    namespace: str

    @classmethod
    def from_settings(cls, settings: Settings) -> FleetConfig:
        url = settings.warehouse.catalog_url
        if not url.startswith("postgresql"):
            raise ConfigError(
                "fleet mode needs warehouse.catalog_url on PostgreSQL (every gateway shares the "
                f"catalog and the batch ledger); got {url or 'the default SQLite file'!r}"
            )
        return cls(
            catalog_url=url,
            warehouse_uri=settings.fleet.warehouse_uri.rstrip("/"),
            s3_endpoint=settings.fleet.s3_endpoint,
            s3_access_key=settings.fleet.s3_access_key,
            s3_secret_key=settings.fleet.s3_secret_key,
            s3_region=settings.fleet.s3_region,
            namespace=settings.fleet.namespace,
        )

    def io_properties(self) -> dict[str, str]:
        """pyiceberg FileIO properties: pyarrow's S3 filesystem, talking plain S3."""
        props = {
            "py-io-impl": "pyiceberg.io.pyarrow.PyArrowFileIO",
            "s3.region": self.s3_region,
        }
        if self.s3_endpoint:
            props["s3.endpoint"] = self.s3_endpoint
        if self.s3_access_key:
            props["s3.access-key-id"] = self.s3_access_key
            props["s3.secret-access-key"] = self.s3_secret_key
        return props


def open_catalog(config: FleetConfig) -> SqlCatalog:
    from pyiceberg.catalog.sql import SqlCatalog
    from sqlalchemy.exc import DBAPIError

    props: dict[str, Any] = {"uri": config.catalog_url, "warehouse": config.warehouse_uri}
    props.update(config.io_properties())
    try:
        return SqlCatalog("fleetscope", **props)
    except DBAPIError:  # another gateway created the catalog's tables at the same moment
        return SqlCatalog("fleetscope", **props)


def s3_filesystem(config: FleetConfig, *, allow_bucket_creation: bool = False) -> S3FileSystem:
    """pyarrow's S3 filesystem on the fleet's object store (the client pyiceberg's FileIO uses)."""
    from pyarrow.fs import S3FileSystem

    endpoint = config.s3_endpoint
    scheme = "http" if endpoint.startswith("http://") else "https"
    return S3FileSystem(
        endpoint_override=endpoint.split("://", 1)[-1] or None,
        scheme=scheme,
        access_key=config.s3_access_key or None,
        secret_key=config.s3_secret_key or None,
        region=config.s3_region,
        allow_bucket_creation=allow_bucket_creation,
    )


def ensure_bucket(config: FleetConfig) -> None:
    """Create the bucket when missing (a fresh MinIO or test server); no-op when it exists."""
    bucket = config.warehouse_uri.removeprefix("s3://").split("/", 1)[0]
    s3_filesystem(config, allow_bucket_creation=True).create_dir(bucket)


class FleetTables:
    """The contract's tables as Iceberg tables, created on first use."""

    def __init__(self, config: FleetConfig) -> None:
        self.config = config
        self.catalog = open_catalog(config)
        self._tables: dict[str, Table] = {}

    def identifier(self, name: str) -> str:
        return f"{self.config.namespace}.{name}"

    def table(self, name: str) -> Table:
        """The table `name`, loaded once and refreshed by callers that need the newest; a
        contract table made by an older build gains the contract's newer columns first."""
        if name not in self._tables:
            table = self._load_or_create(name)
            contract = TABLES.get(name)  # a roll-up table (gpu_samples_1h) is no contract table
            self._tables[name] = table if contract is None else evolve_contract(table, contract)
        return self._tables[name]

    def rollup_table(self, name: str, arrow_schema: pa.Schema) -> Table:
        """A roll-up table (same layout: day(ts), cluster, sorted by ts), created on first use."""
        if name not in self._tables:
            self._tables[name] = self._load_or_create(name, arrow_schema)
        return self._tables[name]

    def derived_table(
        self, name: str, arrow_schema: pa.Schema, ts: str, identity: tuple[str, ...] = ()
    ) -> Table:
        """A table of derived rows (the analyzers' quantile sketches), laid out as the telemetry
        by day(`ts`) and cluster, then by the `identity` columns; created on first use."""
        if name not in self._tables:
            self._tables[name] = self._load_or_create(name, arrow_schema, ts, identity)
        return self._tables[name]

    def existing(self, name: str) -> Table | None:
        """The table `name` if some writer made it, else None (upkeep of a roll-up table that no
        retention has written yet has nothing to do, and must not create it)."""
        from pyiceberg.exceptions import NoSuchTableError

        if name not in self._tables:
            try:
                self._tables[name] = self.catalog.load_table(self.identifier(name))
            except NoSuchTableError:
                return None
        return self._tables[name]

    def ensure_all(self) -> None:
        """Bucket and every contract table, created when missing (any gateway may be first)."""
        ensure_bucket(self.config)
        for name in TABLES:
            self.table(name)

    def _load_or_create(
        self,
        name: str,
        arrow_schema: pa.Schema | None = None,
        ts: str = "ts",
        identity: tuple[str, ...] = (),
    ) -> Table:
        from pyiceberg.exceptions import (
            NamespaceAlreadyExistsError,
            NoSuchTableError,
            TableAlreadyExistsError,
        )

        try:
            return self.catalog.load_table(self.identifier(name))
        except NoSuchTableError:
            pass
        with contextlib.suppress(NamespaceAlreadyExistsError):
            self.catalog.create_namespace(self.config.namespace)
        schema, spec, order = layout(
            arrow_schema if arrow_schema is not None else TABLES[name], ts, identity
        )
        try:
            return self.catalog.create_table(
                self.identifier(name), schema=schema, partition_spec=spec, sort_order=order
            )
        except TableAlreadyExistsError:  # another gateway created it meanwhile
            return self.catalog.load_table(self.identifier(name))


def layout(
    arrow_schema: pa.Schema, ts: str = "ts", identity: tuple[str, ...] = ()
) -> tuple[Any, Any, Any]:
    """Iceberg schema, partition spec (day(ts), cluster, then `identity`'s columns) and sort order
    (ts) for a contract table (or a derived one, whose time column is `ts`)."""
    from pyiceberg.io.pyarrow import _ConvertToIcebergWithoutIDs, visit_pyarrow
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import assign_fresh_schema_ids
    from pyiceberg.table.sorting import SortField, SortOrder
    from pyiceberg.transforms import DayTransform, IdentityTransform

    schema = assign_fresh_schema_ids(visit_pyarrow(arrow_schema, _ConvertToIcebergWithoutIDs()))
    ts_id = schema.find_field(ts).field_id
    cluster_id = schema.find_field("cluster").field_id
    spec = PartitionSpec(
        PartitionField(source_id=ts_id, field_id=1000, transform=DayTransform(), name=f"{ts}_day"),
        PartitionField(
            source_id=cluster_id, field_id=1001, transform=IdentityTransform(), name="cluster"
        ),
        *(
            PartitionField(
                source_id=schema.find_field(column).field_id,
                field_id=1002 + n,
                transform=IdentityTransform(),
                name=column,
            )
            for n, column in enumerate(identity)
        ),
    )
    order = SortOrder(SortField(source_id=ts_id, transform=IdentityTransform()))
    return schema, spec, order


def to_table_schema(data: pa.Table, table: Table) -> pa.Table:
    """Rows sorted by (cluster, ts) and cast to the Iceberg table's Arrow types (us, int32)."""
    ordered = data.sort_by([("cluster", "ascending"), ("ts", "ascending")])
    return ordered.cast(table.schema().as_arrow())


def to_contract(name: str, data: pa.Table) -> pa.Table:
    """Rows read from Iceberg back in the contract's exact Arrow schema (ms, int16); a column a
    table made by an older build lacks reads as null."""
    schema = TABLES[name]
    columns = [
        data.column(f.name).cast(f.type)
        if f.name in data.column_names
        else pa.nulls(data.num_rows, f.type)
        for f in schema
    ]
    return pa.Table.from_arrays(columns, schema=schema)


def evolve_contract(table: Table, arrow_schema: pa.Schema) -> Table:
    """`table` with the contract columns it lacks added (contract schema version 2 added
    step_samples' flops_per_step and compute_dtype): Iceberg schema evolution, so older data
    files read them as null. A gateway that loses the race to another's update reloads the
    winner's table. No commit when nothing is missing."""
    from pyiceberg.exceptions import CommitFailedException

    missing = [f for f in arrow_schema if f.name not in set(table.schema().column_names)]
    if not missing:
        return table
    try:
        with table.update_schema() as update:
            update.union_by_name(pa.schema(missing))
    except CommitFailedException:
        pass
    table.refresh()
    return table
