"""A Bloom filter of the batch ids in the ledger: most acks need no ledger query (issue 27).

Why: once a group is acknowledged on the ingest log, the ledger probe (`batch_id IN (...)` on
DuckDB, about 1 ms of CPU even for one id) was the largest CPU cost left on the ack path, and
nearly every id it probes is new. An id the filter has never seen is certainly not in the ledger;
an id it may have seen (a retry, or a false positive: about 1 % at capacity) is probed as before.
The filter is built at start from the ledger and fed by every flush; deleting ledger rows
(retention) only leaves false positives. When it holds more ids than its capacity it is rebuilt,
twice as large, from the ledger. In memory only; Python's per-process string hash is fine for
that. Never touches the database itself: the writer hands it the ids.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["LedgerFilter"]

_BITS_PER_ID = 10  # with 7 hashes: about 1 % false positives at capacity
_HASHES = 7
_MIN_CAPACITY = 1 << 16


class LedgerFilter:
    def __init__(self, capacity: int) -> None:
        self.capacity = max(_MIN_CAPACITY, capacity)
        self._bits = self.capacity * _BITS_PER_ID
        self._array = bytearray(self._bits // 8 + 1)
        self.count = 0

    @property
    def full(self) -> bool:
        return self.count > self.capacity

    def add(self, batch_ids: Iterable[str]) -> None:
        array, bits = self._array, self._bits
        for batch_id in batch_ids:
            for position in _positions(batch_id, bits):
                array[position >> 3] |= 1 << (position & 7)
            self.count += 1

    def may_hold(self, batch_id: str) -> bool:
        array = self._array
        return all(array[p >> 3] & (1 << (p & 7)) for p in _positions(batch_id, self._bits))


def _positions(batch_id: str, bits: int) -> list[int]:
    first = hash(batch_id)
    second = hash((batch_id, 0x5BD1E995)) | 1
    return [(first + i * second) % bits for i in range(_HASHES)]
