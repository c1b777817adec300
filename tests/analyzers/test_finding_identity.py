"""A finding's id is SHA-256 over what the finding is about (analyzers.findings.finding_id), the
same digest whichever implementation computes it: stored ids never change."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta, timezone

from analyzers.findings import finding_id


def test_the_id_is_the_first_24_hex_chars_of_sha256_over_the_fields() -> None:
    bucket = datetime(2026, 11, 25, 4, 30, 15, tzinfo=UTC)
    text = "\x1f".join(("T1", "job-7", "node-3", "0,1", "2026-11-25T04:30:15Z", "rank0"))
    expected = hashlib.sha256(text.encode()).hexdigest()[:24]
    assert finding_id("T1", "job-7", "node-3", ("1", "0"), bucket, "rank0") == expected
    unnamed = "\x1f".join(("T1", "", "", "", "2026-11-25T04:30:15Z", ""))
    assert (
        finding_id("T1", None, None, (), bucket)
        == hashlib.sha256(unnamed.encode()).hexdigest()[:24]
    )


def test_the_bucket_is_compared_in_utc() -> None:
    utc = datetime(2026, 11, 25, 4, 30, tzinfo=UTC)
    elsewhere = utc.astimezone(timezone(timedelta(hours=9)))
    assert finding_id("T1", "j", "h", ("0",), utc) == finding_id("T1", "j", "h", ("0",), elsewhere)
