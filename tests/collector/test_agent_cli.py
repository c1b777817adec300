"""`fleetscope-agent once / check`, and the agent's own /metrics and /healthz."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from collector.cli import build_parser, main
from collector.metrics import AgentMetrics, MetricsServer, freshness_check
from fleetscope.contract import GPU_SAMPLES


@pytest.fixture(autouse=True)
def _no_config_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FLEETSCOPE_CONFIG", raising=False)
    monkeypatch.setenv("FLEETSCOPE_AGENT_PROC_ROOT", "")


def test_once_prints_one_canonical_json_object_per_gpu(
    make_exporter: Callable[[str], Any],
    page: Callable[[str], str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    server = make_exporter(page("h100_slurm_main"))
    assert main(["once", "--dcgm-url", server.url, "--format", "json"]) == 0
    lines = capsys.readouterr().out.splitlines()
    records = [json.loads(line) for line in lines]
    assert len(records) == 8
    assert all(list(r) == GPU_SAMPLES.names for r in records)
    first = records[0]
    assert (first["host"], first["gpu_index"], first["job_id"], first["attribution"]) == (
        "dgx-b7", 0, "918273", "hpc_job",
    )  # fmt: skip
    assert (first["sm_active"], first["fb_used_mib"]) == (0.262747, 31566.0)
    assert first["ts"].endswith("+00:00")


def test_once_on_an_unparsable_page_names_the_line(
    make_exporter: Callable[[str], Any], capsys: pytest.CaptureFixture[str]
) -> None:
    server = make_exporter(
        '# HELP x y\nDCGM_FI_DEV_GPU_UTIL{gpu="0"} 1\nDCGM_FI_DEV_GPU_UTIL{gpu="1" 2\n'
    )
    code = main(["once", "--dcgm-url", server.url])
    err = capsys.readouterr().err
    assert code == 3
    assert err.startswith("fleetscope-agent: error: line 3: ")
    assert "Traceback" not in err


def test_once_with_no_exporter_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["once", "--dcgm-url", "http://127.0.0.1:9/metrics"]) == 7
    assert capsys.readouterr().err.startswith("fleetscope-agent: error: GET http://127.0.0.1:9/")


def test_check_reports_missing_profiling_fields_with_csv_lines(
    make_exporter: Callable[[str], Any],
    ingest: Any,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server = make_exporter(
        'DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-a",hpc_job="42"} 100\n'
        'DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu="0",UUID="GPU-a",hpc_job="42"} 0.9\n'
    )
    monkeypatch.setenv("FLEETSCOPE_AGENT_INGEST_URL", ingest.url)
    monkeypatch.setenv("FLEETSCOPE_AGENT_TOKEN", "t0ken")
    assert main(["check", "--dcgm-url", server.url]) == 0
    out = capsys.readouterr().out
    assert "OK   exporter: " in out and "1 GPUs or MIG instances" in out
    assert "WARN exporter: profiling fields missing: sm_active, sm_occupancy, tensor_active" in out
    assert "     DCGM_FI_PROF_SM_ACTIVE, gauge, " in out
    assert "OK   ingest: token accepted" in out
    assert "     gpu 0: 42 [hpc_job]" in out
    monkeypatch.setenv("FLEETSCOPE_AGENT_TOKEN", "wrong")
    assert main(["check", "--dcgm-url", server.url]) == 1
    assert "FAIL ingest: token refused (HTTP 401)" in capsys.readouterr().out


def test_help_lists_the_three_commands() -> None:
    help_text = build_parser().format_help()
    assert all(cmd in help_text for cmd in ("once", "check", "run"))


def test_metrics_and_healthz_endpoints() -> None:
    metrics = AgentMetrics()
    metrics.errors.labels("gpu_source_parse").inc()
    last = [None]
    server = MetricsServer(
        metrics, freshness_check(lambda: last[0], 30.0, clock=lambda: 1000.0), 0, host="127.0.0.1"
    )
    server.start()
    base = f"http://127.0.0.1:{server.port}"
    try:
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(base + "/healthz", timeout=5)
        assert info.value.code == 503
        info.value.close()
        last[0] = 990.0
        with urllib.request.urlopen(base + "/healthz", timeout=5) as resp:
            assert resp.read() == b"ok\n"
        with urllib.request.urlopen(base + "/metrics", timeout=5) as resp:
            text = resp.read().decode()
    finally:
        server.close()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert families["fleetscope_agent_errors"].samples[0].labels == {"kind": "gpu_source_parse"}
    assert "fleetscope_agent_spool_depth_batches" in families
    assert "fleetscope_agent_scrape_duration_seconds" in families
