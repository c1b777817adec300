"""Root cause over symptom (issue 13): analyzers.rules.causes folds the rules a root explains into its
evidence; only the root is a finding, and unrelated or non-overlapping findings stay."""

from __future__ import annotations

from datetime import timedelta

from analyzers.base import StaticJobCatalog
from analyzers.findings import Finding
from analyzers.reports.ranking import rank
from analyzers.rules.causes import detected_rules, resolve
from analyzers.run.runner import Pipeline
from analyzers.run.window import Window
from simulator.maker.series import T0, Fleet


def finding(
    rule: str, job: str = "j", gpus: tuple[str, ...] = ("0",), hours: float = 1.0
) -> Finding:
    return Finding(
        rule_id=rule,
        severity="warn",
        job_id=job,
        host="h1",
        gpus=gpus,
        window_start=T0,
        window_end=T0 + timedelta(hours=3),
        title=rule,
        recommendation="-",
        wasted_gpu_hours=hours,
        estimate_method="-",
        evidence={"x": 1},
    )


def test_starved_input_explains_low_sm_activity_and_low_utilization() -> None:
    out = resolve([finding("R6", hours=2.0), finding("P1", gpus=(), hours=1.5), finding("R2")])
    assert [f.rule_id for f in out] == ["P1"]
    assert [s["rule_id"] for s in out[0].evidence["symptoms"]] == ["R2", "R6"]
    assert out[0].wasted_gpu_hours == 1.5  # the root's own estimate, never the sum
    assert detected_rules(out) == {("j", "P1"), ("j", "R2"), ("j", "R6")}


def test_idle_explains_everything_below_but_not_throttling() -> None:
    out = resolve([finding("R2"), finding("R11"), finding("R1"), finding("R16")])
    assert sorted(f.rule_id for f in out) == ["R1", "R16"]


def test_a_hardware_fault_explains_the_idle_gpu_after_it() -> None:
    out = resolve([finding("R3"), finding("R1"), finding("R17")])
    assert [f.rule_id for f in out] == ["R17"]
    assert [s["rule_id"] for s in out[0].evidence["symptoms"]] == ["R1", "R3"]


def test_a_symptom_on_other_gpus_or_another_job_is_its_own_finding() -> None:
    out = resolve([finding("R2", gpus=("0",)), finding("R6", gpus=("1",)), finding("R6", job="k")])
    assert sorted((f.rule_id, f.job_id) for f in out) == [("R2", "j"), ("R6", "j"), ("R6", "k")]


def test_a_small_job_is_reported_once_and_ranked_once() -> None:
    conn = (
        Fleet()
        .gpus("small", "h1", range(8), 0, 240, interval_s=30.0, gpu_util=10.0, fb_used_mib=4000.0)
        .connect()
    )
    found = (
        Pipeline.default()
        .run(conn, Window(T0, T0 + timedelta(days=1)), StaticJobCatalog())
        .findings
    )
    assert [f.rule_id for f in found] == ["R5"]
    assert sorted(s["rule_id"] for s in found[0].evidence["symptoms"]) == ["R11", "R2"]
    report = rank(found)
    assert report.total_gpu_hours == found[0].wasted_gpu_hours
