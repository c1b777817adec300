"""Findings in plain language (analyzers.plain): the words every view uses."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from analyzers.findings import Finding, Severity
from analyzers.plain import evidence_rows, plain, plain_record, rule_name, to_text, utc_span

START = datetime(2026, 11, 24, 14, 5, tzinfo=UTC)
END = datetime(2026, 11, 24, 16, 30, tzinfo=UTC)


def _finding() -> Finding:
    return Finding(
        rule_id="R3",
        severity=Severity.CRITICAL,
        job_id="train-7",
        host="gpu-node-01",
        gpus=("0", "1"),
        window_start=START,
        window_end=END,
        title="GPU(s) 0, 1 at 0 % for 145 min",
        recommendation="Cancel the job and resubmit it when it can use the GPU.",
        wasted_gpu_hours=4.8333,
        estimate_method="hours of the idle stretches inside the window",
        evidence={
            "longest_idle_min": 145.0,
            "ongoing": True,
            "data_wait_share": 0.4123,
            "step_median_s": 0.0715,
            "fb_used_max_mib": 2048.0,
            "host": None,
            "stretches": [
                {"gpu": "0", "from_epoch_s": START.timestamp(), "to_epoch_s": END.timestamp()}
            ],
            "samples": {
                "table": "gpu_samples",
                "host": "gpu-node-01",
                "gpus": ["0", "1"],
                "from_epoch_s": START.timestamp(),
                "to_epoch_s": END.timestamp(),
            },
            "_meta": {"title": "hidden", "job_name": None},
        },
    )


def test_evidence_reads_with_units_human_utc_times_and_no_json() -> None:
    assert evidence_rows(_finding().evidence) == [
        ("longest idle", "145 min"),
        ("ongoing", "yes"),
        ("data wait", "41.2 %"),
        ("step median", "71.5 ms"),
        ("fb used max", "2 GiB"),
        ("host", "n/a"),
        ("stretches", "gpu 0 2026-11-24 14:05 to 16:30 UTC"),
        ("data", "gpu_samples, gpu-node-01, gpus 0, 1 2026-11-24 14:05 to 16:30 UTC"),
    ]


def test_keys_that_differ_only_in_their_unit_keep_what_the_unit_measures() -> None:
    """T1's evidence once read "idle 98.3 %" and "idle 8.76 ms" on one table."""
    evidence = {"idle_share": 0.983, "idle_us": 8763.0, "per_stream_idle_us": 2000.0}
    assert evidence_rows(evidence) == [
        ("idle share", "98.3 %"),
        ("idle time", "8.76 ms"),
        ("per stream idle", "2 ms"),
    ]


def test_t10s_evidence_reads_as_cuda_and_a_share() -> None:
    """T10's evidence read "compute capability 9" and "amp gpu busy saved fraction 0.223"."""
    assert evidence_rows({"compute_capability": 9.0, "amp_gpu_busy_saved_fraction": 0.2234}) == [
        ("compute capability", "9.0"),
        ("amp gpu busy saved", "22.3 %"),
    ]


def test_a_breakdown_under_a_unit_key_reads_in_that_unit() -> None:
    """T1's idle time by cause read "host wait 8,763, kernel wait 0, other 0": no unit."""
    causes = {"host_wait": 8762.845, "kernel_wait": 0, "other": 0}
    assert evidence_rows({"per_stream_idle_us": causes}) == [
        ("per stream idle", "host wait 8.76 ms, kernel wait 0 ms, other 0 ms")
    ]


def test_a_finding_and_its_catalog_row_read_the_same() -> None:
    finding = _finding()
    from analyzers.run.results import to_catalog

    row = to_catalog(finding)
    record = {c: getattr(row, c) for c in (
        "rule_id", "severity", "job_id", "host", "gpus", "window_start", "window_end",
        "wasted_gpu_hours", "estimate_method", "evidence", "recommendation",
    )}  # fmt: skip
    from_row = plain_record(record)
    direct = plain(finding)
    assert from_row.problem == direct.problem == "GPU(s) 0, 1 at 0 % for 145 min"
    assert from_row.evidence == direct.evidence
    assert (from_row.rule, from_row.when) == ("Idle allocation", "2026-11-24 14:05 to 16:30 UTC")


def test_the_cli_form() -> None:
    assert to_text(plain(_finding())).splitlines()[:4] == [
        "  R3   Idle allocation · critical · 4.83 GPU-h recoverable",
        "       problem: GPU(s) 0, 1 at 0 % for 145 min",
        "       fix: Cancel the job and resubmit it when it can use the GPU.",
        "       where: job train-7, gpu-node-01, GPU 0, 1, 2026-11-24 14:05 to 16:30 UTC",
    ]


def test_a_finding_nobody_priced_says_so_instead_of_zero_gpu_hours() -> None:
    """R15 and a trace rule with no step to replay put no number on the waste: "0 GPU-h
    recoverable" beside "estimate: not estimated" read as a contradiction."""
    unpriced = replace(
        _finding(),
        wasted_gpu_hours=0.0,
        estimate_method="not estimated (no ProfilerStep ranges or launches to replay)",
    )
    assert not plain(unpriced).estimated and plain(_finding()).estimated
    assert to_text(plain(unpriced)).splitlines()[0] == (
        "  R3   Idle allocation · critical · recoverable GPU-hours not estimated"
    )


def test_names_and_spans() -> None:
    assert rule_name("P1") == "Data-loader stall"
    assert rule_name("X99") == "X99"  # an external analyzer's rule keeps its id
    assert utc_span(START, datetime(2026, 11, 25, 1, 0, tzinfo=UTC)) == (
        "2026-11-24 14:05 to 2026-11-25 01:00 UTC"
    )


def test_each_absorbed_symptom_reads_as_a_row_of_its_own() -> None:
    """A root cause carries the findings it explains (analyzers.rules.causes): each reads as
    'also <rule>' with its own line, hours and evidence, not one run-on list of dicts."""
    from dataclasses import replace

    from analyzers.rules.causes import resolve

    root = replace(_finding(), evidence={"idle_min": 145.0})
    symptom = replace(
        _finding(),
        rule_id="R2",
        severity=Severity.WARN,
        title="job-mean GPU utilization 0.0 % over 2 GPU(s)",
        wasted_gpu_hours=4.8,
        evidence={"util_mean_pct": 0.0, "samples": {"table": "gpu_samples", "host": "x"}},
    )
    (finding,) = resolve([root, symptom])
    assert evidence_rows(finding.evidence) == [
        ("idle", "145 min"),
        ("also R2", "job-mean GPU utilization 0.0 % over 2 GPU(s) · 4.8 GPU-h · util mean 0 %"),
    ]


def test_a_list_of_gpus_names_them_as_gpus() -> None:
    """R1's `idle_gpus: ["0"]` read "idle gpus 0" in the weekly PDF: as if no GPU were idle."""
    from analyzers.plain import value_text

    assert value_text("idle_gpus", ["0", "3/mig1"]) == "GPU 0, GPU 3/mig1"
    assert value_text("idle_gpus", []) == "none"


def test_a_kernels_long_template_name_is_cut_in_the_evidence_and_whole_in_the_raw_json() -> None:
    """T13 named four demangled CUTLASS/ATen kernels of 200-400 characters each: the evidence
    cell was a wall of template arguments."""
    name = "void at::native::reduce_kernel<128, 4, at::native::ReduceOp<float, " + "x" * 300 + ">"
    node = "gke-training-a100-pool-7f3c2b1d-x9qz.us-central1-a.c.ml-platform.internal"
    evidence = {"kernels": [{"name": name, "calls": 486}], "host": node, "trace": "rank-3.json"}
    finding = replace(_finding(), rule_id="T13", evidence=evidence)
    assert evidence_rows(finding.evidence) == [
        ("kernels", f"name {name[:59]}…, calls 486"),
        ("host", node),  # an identifier stays whole: it is copied, not read
        ("trace", "rank-3.json"),
    ]
    assert plain(finding).raw["kernels"][0]["name"] == name
