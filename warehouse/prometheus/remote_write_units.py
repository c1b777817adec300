"""The scrapes one remote_write request (or flush) takes, as ONE writer ticket of many parts.

Why: each scrape is its own idempotency unit (its ledger batch id is the hash of its (cluster,
host, timestamp) key, whichever receiver assembled it and whatever else was taken with it), but
one writer ticket per scrape made a catch-up request of 1,000 scrapes take 8.8 s (issue 28 wants
an answer within 2 s: bench/RESULTS.md). So the rows of all the scrapes taken together are built
as one table and submitted once (`BatchQueue.submit_parts`), each scrape a `Part` with its own
batch id and content digest: the writers still deduplicate, refuse (409) and isolate per scrape.

The digest of a part is over its rows as values, not over Arrow buffers: the buffers of a slice
depend on the rest of the table it was cut from, and two receivers that took the same scrape with
different neighbours must compute the same digest (else a re-send would be a 409, not a
duplicate). Must never do I/O.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa

from warehouse.ingest.batch_queue import Part
from warehouse.prometheus.rows import ScrapeKey, rows_for_scrape, rows_to_table

if TYPE_CHECKING:
    from warehouse.prometheus.remote_write import Scrape

__all__ = ["Unit", "scrape_batch_id", "unit_of"]


@dataclass(frozen=True)
class Unit:
    """Rows of scrapes taken together: one writer ticket, one part (ledger batch) per scrape."""

    table: pa.Table
    parts: tuple[Part, ...]


def scrape_batch_id(key: ScrapeKey, ts_ms: int) -> str:
    """The ledger id of one scrape: the same on every receiver and across restarts."""
    cluster, host = key
    return "prw-" + hashlib.sha256(f"{cluster}\t{host}\t{ts_ms}".encode()).hexdigest()[:40]


def unit_of(scrapes: Sequence[Scrape]) -> Unit:
    """The scrapes' rows in (timestamp, target) order, one part per scrape."""
    rows: list[dict[str, object]] = []
    parts: list[Part] = []
    for scrape in sorted(scrapes, key=lambda s: (s.ts_ms, s.key)):
        scrape_rows = rows_for_scrape(scrape.key, scrape.ts_ms, scrape.samples.values())
        digest = hashlib.sha256(b"gpu_samples")
        for text in sorted(repr(sorted(row.items())) for row in scrape_rows):
            digest.update(text.encode())
        batch_id = scrape_batch_id(scrape.key, scrape.ts_ms)
        parts.append(Part(batch_id, len(rows), len(scrape_rows), digest.hexdigest()[:32]))
        rows.extend(scrape_rows)
    return Unit(rows_to_table(rows), tuple(parts))
