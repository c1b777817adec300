"""analyzers.traces.service in a real server (it is in server.plugins by default): an uploaded
trace is analyzed on the server once, its summary and analysis document land in the catalog and
make the request done; a trace the analyses cannot read fails the request with the trace error,
word for word."""

from __future__ import annotations

import gzip
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from analyzers.traces.analyses import load_registry
from analyzers.traces.document import DOCUMENT_VERSION
from fleetscope import plugins
from fleetscope.settings import Settings, load_settings
from warehouse.catalog.profiling import get_trace_analysis
from warehouse.ingest.runtime import Server
from warehouse.profiling.agent_registry import ReportedProcess

RESNET_NW0 = (
    Path(__file__).resolve().parents[1]
    / "data/traces/kineto_resnet50_nw0/worker0.1623143089861.pt.trace.json.gz"
)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    settings: Settings = load_settings(env={}).with_overrides(
        core__data_dir=str(tmp_path / "data"),
        server__port=0,
        warehouse__maintenance_interval_s=3600.0,
    )
    installed = list(plugins.registered(plugins.SERVER))  # the default selects every one
    assert "analyzers.traces.service" in plugins.select_names(settings.server.plugins, installed)
    running = Server(settings)
    running.start()
    try:
        yield running
    finally:
        running.stop()


def upload(server: Server, body: bytes) -> int:
    """A request for job train-1 matched on node-a pid 9, and its trace received."""
    service = server.profiling
    service.poll("node-a", [ReportedProcess(9, "train-1", 0)])
    request_id = service.create("train-1", steps=5)
    service.poll("node-a", [ReportedProcess(9, "train-1", 0)])
    service.receive_trace(request_id, "node-a", 9, 0, body)
    return request_id


def finished(server: Server, request_id: int) -> dict[str, Any]:
    deadline = time.monotonic() + 120
    while (request := server.profiling.describe(request_id))["state"] == "running":
        assert time.monotonic() < deadline, request
        time.sleep(0.05)
    return request


def test_an_uploaded_trace_is_analyzed_and_its_findings_stored(server: Server) -> None:
    request = finished(server, upload(server, RESNET_NW0.read_bytes()))
    assert (request["state"], request["error"]) == ("done", None)
    (summary,) = request["summary"]
    assert (summary["trace_id"], summary["host"], summary["pid"]) == (
        "req1-node-a-pid9",
        "node-a",
        9,
    )
    # The README of this trace: DataLoader num_workers=0, about 40 % of step time in the loader.
    head = summary["headline"]["0"]
    assert 0.3 < head["dataloader_share"] < 0.5
    t8 = [f for f in summary["findings"] if f["rule_id"] == "T8"]
    assert len(t8) == 1 and t8[0]["job_id"] == "train-1"
    assert t8[0]["recommendation"].startswith("raise DataLoader(num_workers=...)")
    assert set(summary["per_rank"]) >= {"dataloader", "steps", "temporal_breakdown"}
    assert "notes" in summary["whatif"]
    # The whole analysis is stored once, beside the summary (the dashboard draws it), and
    # nothing but the trace is written next to the trace.
    with server.catalog.connect() as conn:
        document = get_trace_analysis(conn, "req1-node-a-pid9")
    assert document is not None and document["version"] == DOCUMENT_VERSION
    assert document["findings"] == summary["findings"]
    assert set(document["analyses"]) == set(load_registry())
    assert document["timeline"]["0"]["total"] > 0
    trace = Path(request["traces"][0]["path"])
    assert [p.name for p in trace.parent.iterdir()] == [trace.name]


def test_an_unreadable_trace_fails_the_request_with_the_trace_error(server: Server) -> None:
    request = finished(server, upload(server, gzip.compress(b'{"traceEvents": 5}')))
    assert request["state"] == "failed"
    assert request["error"] == (
        "node-a pid 9: trace req1-node-a-pid9: "
        f"{request['traces'][0]['path']}: not a Kineto trace: expected '[' to open traceEvents, "
        "found '5'"
    )
    with server.catalog.connect() as conn:
        assert get_trace_analysis(conn, "req1-node-a-pid9") is None


def test_the_stored_summary_is_the_one_the_default_options_give() -> None:
    """The upload runs once under `document.OPTIONS` (more top kernels for the Trace page); the
    summary the API answers stays what the analyses' defaults give."""
    from analyzers.traces.api import analyze_trace
    from analyzers.traces.document import OPTIONS
    from analyzers.traces.summary import summarize

    def summary(**options: Any) -> dict[str, Any]:
        report = analyze_trace(RESNET_NW0, job_id="train-1", **options)
        return summarize(report, trace_id="t", host="node-a", pid=9)

    assert OPTIONS.top_kernels > 10
    assert summary(options=OPTIONS) == summary()
