"""The ledger's Bloom filter never forgets an id (a miss would skip the ledger probe of a stored
batch and store it twice), and a retry after a restart is still answered duplicate."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from simulator.maker.batches import gpu_batch
from warehouse.storage.ledger_filter import LedgerFilter
from warehouse.storage.segments import SegmentStore
from warehouse.storage.writer import Writer


@given(st.lists(st.text(min_size=1, max_size=64), min_size=1, max_size=500))
def test_every_added_id_may_be_held(ids: list[str]) -> None:
    ledger = LedgerFilter(capacity=len(ids))
    ledger.add(ids)
    assert all(ledger.may_hold(i) for i in ids)


def test_most_new_ids_skip_the_probe_at_capacity() -> None:
    ledger = LedgerFilter(capacity=100_000)
    ledger.add(f"stored-{i}" for i in range(100_000))
    false_positives = sum(ledger.may_hold(f"new-{i}") for i in range(20_000))
    assert false_positives < 20_000 * 0.03
    assert not ledger.full
    ledger.add(["one more"] * 1)
    assert ledger.count == 100_001 and ledger.full


def test_a_retry_after_a_restart_is_a_duplicate(tmp_path: Path) -> None:
    def open_writer() -> Writer:
        return Writer(
            tmp_path / "t.duckdb", SegmentStore(tmp_path / "segments"),
            flush_rows=10**6, flush_interval_s=0.05, queue_max_rows=10**6,
        )  # fmt: skip

    batch = gpu_batch("f", timestamps=1)
    first = open_writer()
    first.start()
    ticket, _ = first.submit("gpu_samples", batch, "kept")
    assert ticket.wait(60) and not ticket.duplicate
    first.stop()
    again = open_writer()  # its filter is rebuilt from the ledger
    again.start()
    try:
        retry, _ = again.submit("gpu_samples", batch, "kept")
        assert retry.wait(60) and (retry.status, retry.duplicate) == (202, True)
    finally:
        again.stop()
