"""Fleet mode: Apache Iceberg tables on S3-compatible storage, written by many stateless gateways.

    tables   the Iceberg catalog (pyiceberg's SQL catalog on PostgreSQL) and the table layout
    writer   a gateway's batching writer: ledger claim, Parquet + Iceberg commit, retries
    gateway  `fleetscope server --mode fleet`: the ingest HTTP routes over that writer
    reader   DuckDB over a pruned Iceberg scan, for analyzers, dashboard and CLI
    upkeep   compaction, snapshot expiry and raw retention, one partition at a time
    orphans  the sweep of files no snapshot reaches (lost commit attempts, expired snapshots)
    trace_objects  uploaded profiler traces in the bucket, readable from every gateway

The embedded mode (warehouse.ingest.runtime) does not import this package.
"""
