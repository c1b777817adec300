"""Warehouse: ingest server, the single DuckDB writer, published Parquet segments for readers,
schema migrations, roll-ups and retention, and the SQLAlchemy catalog.

Importing this package must stay cheap: DuckDB and SQLAlchemy are imported by the modules that
use them."""
