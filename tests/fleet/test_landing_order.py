"""Two runs of one fleet window landing out of order (analyzers.run.fleet_window, issue 30):
beat re-sends a window still owed, so a run for an older arrival mark can land after the run for
a newer one. The older landing is dropped: it would replace findings read from more rows, and
the arrival mark (kept as the greatest) would say the bucket is done."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from analyzers.base import StaticJobCatalog
from analyzers.run.fleet_window import land
from analyzers.run.results import FindingStore
from analyzers.run.runner import Pipeline
from analyzers.run.window import Window
from warehouse import catalog

pytestmark = pytest.mark.real_component("postgres")

BUCKET = datetime(2026, 11, 27, tzinfo=UTC)


def test_a_landing_for_an_older_arrival_than_the_one_landed_is_dropped(pg_url: str) -> None:
    store = FindingStore(catalog.connect(pg_url))
    newer = BUCKET + timedelta(days=1, minutes=5)
    store.mark_bucket("0/1", BUCKET, newer, "analysed")
    window = Window(BUCKET, BUCKET + timedelta(days=1), 0, 1)
    older = newer - timedelta(minutes=1)
    answer = land(Pipeline.default(), store, StaticJobCatalog(), [], window, older)
    assert answer == {
        "window": window.key(),
        "findings": None,
        "superseded_by": newer.isoformat(),
    }
    assert store.analysed_through("0/1", BUCKET) == newer
