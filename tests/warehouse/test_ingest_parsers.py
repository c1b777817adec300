"""Property tests: whatever a client sends, validation answers a value or an IngestError (4xx)."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from fleetscope.errors import IngestError
from warehouse.ingest.envelope import check_envelope, decode_batch, parse_jobs

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=20,
)
job_like = st.lists(
    st.dictionaries(
        st.sampled_from(["job_id", "user", "gpus", "start_ts", "end_ts", "name", "other"]),
        json_values,
        max_size=5,
    ),
    max_size=4,
)


@settings(max_examples=150, deadline=None)
@given(st.one_of(job_like, json_values))
def test_any_json_body_is_parsed_or_refused_with_a_4xx(document: object) -> None:
    try:
        jobs = parse_jobs(json.dumps(document).encode())
    except IngestError as exc:
        assert 400 <= exc.status < 500 and str(exc)
    else:
        assert all(job.job_id for job in jobs)


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=2000))
def test_any_bytes_are_decoded_or_refused_with_a_400(body: bytes) -> None:
    try:
        decode_batch("gpu_samples", body)
    except IngestError as exc:
        assert exc.status == 400


@settings(max_examples=150, deadline=None)
@given(
    st.sampled_from(["gpu_samples", "nope"]),
    st.dictionaries(
        st.sampled_from(
            [
                "Content-Type",
                "Content-Length",
                "X-Fleetscope-Schema-Version",
                "X-Fleetscope-Batch-Id",
                "User-Agent",
            ]
        ),
        st.text(max_size=30),
    ),
)
def test_any_headers_are_accepted_or_refused_with_a_4xx(
    table: str, headers: dict[str, str]
) -> None:
    try:
        envelope = check_envelope(table, headers, max_body_bytes=1000)
    except IngestError as exc:
        assert 400 <= exc.status < 500
    else:
        assert envelope.content_length <= 1000
