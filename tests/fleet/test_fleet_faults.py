"""Two fleet gateway processes under agents, one `kill -9`'d and the S3 server stopped mid-ingest
(issue 28): nothing acknowledged is lost or stored twice. Since issue 27 the gateways acknowledge
on their own ingest log, so the S3 outage delays their flushes (retried), not their answers; the
killed gateway replays what it had acknowledged from its log when it restarts.

Real processes: two `fleetscope server --mode fleet` gateways, moto's S3 server (SIGSTOPped for
4 s: an object store that stops answering, resumed with its objects), PostgreSQL on
127.0.0.1:5432 for the catalog, and the collector's real spool and shipper with both gateway
URLs. The longer version is `python -m bench.fleet_faults`; figures in bench/RESULTS.md.
"""

from __future__ import annotations

from pathlib import Path

from bench.fleet_faults import run


def test_a_killed_gateway_and_a_stopped_s3_lose_and_duplicate_nothing(
    tmp_path: Path, pg_url: str
) -> None:
    result = run(tmp_path, pg_url, agents=2, interval_s=1.0, s3_down_s=4.0)
    assert result.batches > 0
    assert result.unacknowledged == 0  # every spool drained: each batch got its 202
    assert (result.lost, result.duplicated) == (0, 0)
    assert result.stored_rows == result.sealed_rows
