"""Issue 13, end to end: a real server (embedded scheduler) and real agents, fed a day-old,
label-attributed fleet, produce the right root-cause findings with owners and no manual step.

Six real dcgm-exporter stand-ins on loopback serve simulator.field_fleet's pages in time order,
stamped yesterday (a replay). One real agent per host scrapes its exporter, attributes
jobs by the exporter's `pod`/`namespace` or `hpc_job` labels only, reads the Slurm prolog's owner
records, ships over HTTP and reports owners. Nobody runs a backfill: the writer's arrival marks
lead the embedded scheduler to yesterday's bucket within one interval.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from analyzers.accounting.sql import UTIL_PCT_SQL
from analyzers.quantiles.tiers import QuantileStore
from analyzers.run.results import FindingStore
from collector.agent import build_agent
from fleetscope.settings import load_settings
from simulator.field_fleet import jobs, pages
from simulator.wire import TEST_TOKEN
from warehouse.ingest.runtime import Server
from warehouse.read import reader

pytestmark = pytest.mark.slow
HOURS = 4.0
# the jobs that need no training-loop metrics (P1 needs the SDK) and fit in 4 hours
EXPECTED = {
    "41902": ({"R1", "R3"}, "physics"),
    "41877": ({"R5"}, "physics"),
    "41950": ({"R16"}, "chem"),
    "41951": ({"R16"}, "chem"),
    "speech/attn-mem": ({"R8"}, "speech"),
    "speech/xid79": ({"R17"}, "speech"),
}


class Replay:
    """A real HTTP exporter that serves one host's pages in order, then the last one again."""

    def __init__(self, texts: list[str]) -> None:
        self.texts, self.served = texts, 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = outer.texts[min(outer.served, len(outer.texts) - 1)].encode()
                outer.served += 1
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/metrics"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    settings = load_settings(env={}).with_overrides(
        core__data_dir=str(tmp_path / "data"),
        server__port=0,
        server__tokens=TEST_TOKEN,
        server__plugins="analyzers.run.embedded",
        scheduler__interval_s=2.0,
        warehouse__flush_interval_s=0.2,
        warehouse__maintenance_interval_s=3600.0,
    )
    running = Server(settings)
    running.start()
    try:
        yield running
    finally:
        running.stop()


def test_a_day_old_label_attributed_fleet_gets_root_causes_and_owners(
    server: Server, tmp_path: Path
) -> None:
    # Yesterday (UTC) from 08:00: a day-old replay inside one day bucket whatever the hour the
    # test runs. Four hours ending "a day before now" straddled midnight when run between 00:00
    # and 04:00 UTC, and a job cut at a bucket edge shows another rule in each half (R2 for
    # R5's oversized GPU), so the test failed by the clock.
    yesterday = (datetime.now(UTC) - timedelta(days=1)).replace(
        hour=0, minute=0, second=0, microsecond=0
    )
    origin = yesterday + timedelta(hours=8)
    by_host: dict[str, list[str]] = {}
    for host, _ts, text in pages(int(origin.timestamp() * 1000), HOURS, interval_s=60):
        by_host.setdefault(host, []).append(text)
    job_dir = tmp_path / "slurm-jobs"  # what deploy/slurm/prolog.sh writes on each Slurm node
    job_dir.mkdir()
    for job in jobs():
        if "/" not in job.job_id:
            (job_dir / f"{job.job_id}.env").write_text(
                f"SLURM_JOB_ID={job.job_id}\nSLURM_JOB_USER={job.user}\n"
                f"SLURM_JOB_ACCOUNT={job.team}\n"
            )
    exporters = {host: Replay(texts) for host, texts in by_host.items()}
    stop = threading.Event()
    threads = []
    try:
        for host, exporter in exporters.items():
            agent = build_agent(
                load_settings(env={}).with_overrides(
                    agent__dcgm_url=exporter.url,
                    agent__ingest_url=server.url,
                    agent__token=TEST_TOKEN,
                    agent__cluster="field",
                    agent__host=host,
                    agent__interval_s=0.02,
                    agent__host_interval_s=1.0,
                    agent__ship_interval_s=0.5,
                    agent__spool_dir=str(tmp_path / "spool" / host),
                    agent__slurm_job_dir=str(job_dir),
                )
            )
            thread = threading.Thread(target=agent.run, args=(stop,), daemon=True)
            thread.start()
            threads.append(thread)
        store = FindingStore(server.catalog)
        deadline = time.monotonic() + 100
        got: dict[str, set[str]] = {}
        teams: dict[str, str | None] = {}
        while time.monotonic() < deadline:
            found = [s.finding for s in store.findings()]
            got, teams = {}, {}
            for f in found:
                if f.job_id:
                    got.setdefault(f.job_id, set()).add(f.rule_id)
                    teams[f.job_id] = f.team
            done = all(e.served > len(by_host[h]) for h, e in exporters.items())
            # Wait for what is asserted below, symptoms folded included: a pass over a bucket
            # whose data is still arriving may show a symptom (R12) that the pass after the last
            # arrival folds into its root cause (R5) and retracts.
            if done and all(
                got.get(j, set()) & want
                and not got[j] - want - {"R3", "R1"}
                and teams.get(j) == team
                for j, (want, team) in EXPECTED.items()
            ):
                break
            time.sleep(0.5)
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=30)
        for exporter in exporters.values():
            exporter.close()
    for job_id, (want, team) in EXPECTED.items():
        assert got.get(job_id, set()) & want, (job_id, got)
        assert teams[job_id] == team, (job_id, teams)
        # the root cause is the finding; its symptoms are evidence, not findings of their own
        assert not got[job_id] - want - {"R3", "R1"}, (job_id, got[job_id])
    assert "nlp/llama-ft" not in got  # the healthy job
    assert all(
        yesterday <= s.finding.window_start < yesterday + timedelta(days=1)
        for s in store.findings()
    )

    # The quantile sketches cover yesterday's samples too (the owed buckets ran after the
    # current one had moved the sketch marks to today), each value once.
    lo, hi = origin - timedelta(hours=1), origin + timedelta(hours=HOURS + 1)
    sketches = QuantileStore.from_settings(server.settings)
    samples = sketched = -1
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        conn = reader.connect(server.settings)
        (samples,) = conn.execute(
            f"SELECT count(*) FROM gpu_samples WHERE ts >= ? AND ts < ? "
            f"AND isfinite(CAST({UTIL_PCT_SQL} AS DOUBLE))",
            [lo, hi],
        ).fetchone() or (0,)
        conn.close()
        view = sketches.connect()
        (sketched,) = view.execute(
            "SELECT coalesce(sum(count), 0) FROM sketch_panes WHERE metric = 'gpu_util_pct' "
            "AND resolution_s = 60 AND pane_start >= ? AND pane_start < ?",
            [lo, hi],
        ).fetchone() or (0,)
        view.close()
        if samples > 0 and sketched == samples:
            break
        time.sleep(0.5)
    assert samples > 0 and sketched == samples, (samples, sketched)
