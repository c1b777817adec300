"""Advice fits the GPU the trace ran on (issue 29: a V100 trace was told to use TF32): the rules
and the what-if read `deviceProperties` and never advise what the GPU cannot do."""

from __future__ import annotations

import copy
import math
from typing import Any

import pytest

from analyzers.findings import Finding
from analyzers.traces.analyses.base import TraceOptions
from analyzers.traces.api import load_trace_set, run_analyses
from analyzers.traces.findings import trace_findings
from analyzers.traces.hardware import gpu_of
from tests.analyzers.traces.trace_paths import DATA, raw_traces

RESNET = DATA / "kineto_resnet50_nw0"  # a real V100 trace (compute capability 7.0), FP32 training


def _findings_on(device: dict[str, Any]) -> tuple[list[Finding], float]:
    """The real ResNet-50 trace's findings and the GPU busy time its AMP what-if saves, with its device
    properties replaced by `device` (the events unchanged)."""
    raws = []
    for raw in raw_traces(RESNET):
        variant = copy.copy(raw)
        variant.metadata = {**raw.metadata, "deviceProperties": [device]}
        raws.append(variant)
    trace = load_trace_set(RESNET, raws=raws)
    results = run_analyses(trace)
    findings = trace_findings(trace, results, TraceOptions())
    return findings, results["whatif"].value(0, "amp_gpu_busy_saved_fraction")


def _device(name: str, major: int, minor: int) -> dict[str, Any]:
    props = dict(raw_traces(RESNET)[0].metadata["deviceProperties"][0])
    props.update(name=name, computeMajor=major, computeMinor=minor)
    return props


def _advice(findings: list[Finding]) -> str:
    return "\n".join(f"{f.title} {f.recommendation}" for f in findings)


def test_the_real_v100_trace_is_advised_float16_and_never_tf32_or_bfloat16() -> None:
    findings, _ = _findings_on(raw_traces(RESNET)[0].metadata["deviceProperties"][0])
    t10 = next(f for f in findings if f.rule_id == "T10")
    assert (
        "torch.autocast(dtype=torch.float16) with torch.cuda.amp.GradScaler" in t10.recommendation
    )
    assert "Tesla V100-DGXS-32GB (compute capability 7.0)" in t10.recommendation
    assert "TF32" not in _advice(findings).replace("not TF32 or bfloat16", "")
    assert "allow_tf32" not in _advice(findings)


def test_the_same_events_on_an_a100_are_advised_tf32_and_bfloat16() -> None:
    findings, _ = _findings_on(_device("NVIDIA A100-SXM4-80GB", 8, 0))
    t10 = next(f for f in findings if f.rule_id == "T10")
    assert "allow_tf32 = True" in t10.recommendation and "bfloat16" in t10.recommendation


def test_a_gpu_without_tensor_cores_gets_no_tensor_core_advice_and_no_amp_saving() -> None:
    findings, amp_saving = _findings_on(_device("Tesla P100-SXM2-16GB", 6, 0))
    assert "T10" not in {f.rule_id for f in findings}
    assert math.isnan(amp_saving)  # the AMP scenario does not apply (nothing moves to tensor cores)
    _, v100_saving = _findings_on(_device("Tesla V100-SXM2-16GB", 7, 0))
    assert v100_saving > 0


@pytest.mark.parametrize(
    ("name", "major", "minor", "expected"),
    [
        ("Tesla P100-SXM2-16GB", 6, 0, (False, False, False)),
        ("Tesla V100-SXM2-32GB", 7, 0, (True, False, False)),
        ("NVIDIA A100-SXM4-80GB", 8, 0, (True, True, True)),
        ("NVIDIA H100 80GB HBM3", 9, 0, (True, True, True)),
        ("AMD Instinct MI250X", 9, 0, (True, False, True)),  # gfx90a
        ("AMD Instinct MI300X", 9, 4, (True, True, True)),  # gfx942
    ],
)
def test_capabilities_follow_the_compute_capability(
    name: str, major: int, minor: int, expected: tuple[bool, bool, bool]
) -> None:
    gpu = gpu_of([{"name": name, "computeMajor": major, "computeMinor": minor, "numSms": 108}])
    assert (gpu.tensor_cores, gpu.tf32, gpu.bf16) == expected


def test_a_trace_without_device_properties_is_not_held_to_a_guess() -> None:
    gpu = gpu_of([])
    assert math.isnan(gpu.compute_capability)
    assert gpu.tensor_cores and gpu.tf32 and gpu.bf16


@pytest.mark.parametrize(
    ("num_sms", "expected"),
    [(80, 80), (148, 148), (0, None), (-1, None), (True, None), ("80", None)],
)
def test_the_sm_count_is_num_sms_when_a_positive_integer(num_sms: object, expected: int) -> None:
    assert gpu_of([{"name": "NVIDIA B200", "numSms": num_sms}]).sm_count == expected
    assert gpu_of([{"name": "NVIDIA B200"}]).sm_count is None


def test_the_real_traces_sm_counts() -> None:
    """V100 80, A100 108, B200 148 (NVIDIA's data sheets)."""
    for folder, sms in [
        ("kineto_resnet50_nw0", 80),
        ("hta_nccl_data_rank0", 108),
        ("tracelens_b200_eager", 148),
    ]:
        device = raw_traces(DATA / folder)[0].metadata["deviceProperties"]
        assert gpu_of(device).sm_count == sms
