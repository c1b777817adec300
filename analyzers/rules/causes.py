"""Root cause over symptom: rules that describe the same waste on the same GPUs and time form one
causal chain, and only the root is a finding; the symptoms travel in its evidence.

Why: one input-starved job is idle 65 % of the time, so its mean SM activity is low (R6), its
utilization is low (R2) and its utilization profile is poor (R11). All four are true, but only
one is the cause: reporting four findings sends the user to fix small kernels that are not the
problem, and ranks the same hours several times. The precedence (docs/analyzers.md has the table
and the sources):

0. a hardware fault (R17): a GPU that fell off the bus or lost its memory does no work after it,
   which explains the idle and low-utilization rules on that GPU (dcgm-exporter / NVIDIA XID
   catalog: XID 79 "GPU has fallen off the bus", 48 double-bit ECC);
1. idle while allocated (R1 and R3, peers: one cause seen over the job and live): no work at
   all explains every rule below it;
2. starved input, most specific first: R10 I/O wait and R9 CPU bound name why the input is late
   (SageMaker Debugger's bottleneck rules), so they explain the data-loader stall (P1), which
   explains P3 and, like them, low utilization and low SM activity: the GPU waits for data
   (TensorFlow profiler input-pipeline analysis; PyTorch TB plugin T1);
3. the GPU is too big for the job (R5): explains the small batch, low utilization and a poor
   profile (job_defense_shield: suggest MIG or a smaller GPU);
4. batch too small (R12): explains low utilization, the under-utilized profile and low SM activity
   (SageMaker Debugger BatchSize: "the GPU is underutilized because the batch size is too small");
5. low utilization (R2): explains the under-utilized profile (R11) and low SM activity (R6);
6. memory-bound (R8): explains low SM activity (R6) (DCGM: DRAM_ACTIVE near peak with idle SMs).

A symptom is absorbed when it is on the same job and identity bucket, its GPUs overlap the
root's (a job-level finding overlaps every GPU) and its time overlaps. The root keeps its own
waste estimate: the symptom's hours are the same hours, never added. Independent rules (R7, R13,
R16, P2, R4) are never absorbed. A rule outside this table declares its own place
(analyzers.rule_cards: `explains`, `explained_by`), merged in after it. This module must never
read telemetry or the catalog.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from analyzers.findings import Finding

IDLE: Final = ("R1", "R3")
STARVED: Final = ("P1", "R10", "R9", "P3")
LOW_UTIL_SYMPTOMS: Final = ("R2", "R5", "R6", "R8", "R11", "R12")

# root rule -> the rules it explains (applied in this order: earlier roots absorb first)
EXPLAINS: Final[Mapping[str, tuple[str, ...]]] = {
    "R17": ("R1", "R3", *STARVED, *LOW_UTIL_SYMPTOMS, "R13", "R14", "R15"),
    "R1": (*STARVED, *LOW_UTIL_SYMPTOMS, "R14", "R15"),
    "R3": (*STARVED, *LOW_UTIL_SYMPTOMS, "R14", "R15"),
    "R10": ("R9", "P1", "P3", *LOW_UTIL_SYMPTOMS),
    "R9": ("P1", "P3", *LOW_UTIL_SYMPTOMS),
    "P1": ("P3", *LOW_UTIL_SYMPTOMS),
    "P3": LOW_UTIL_SYMPTOMS,
    "R5": ("R12", "R2", "R6", "R11"),
    "R12": ("R2", "R6", "R11"),
    "R2": ("R6", "R11"),
    "R8": ("R6",),
}
PRECEDENCE: Final = tuple(EXPLAINS)
SYMPTOMS_KEY: Final = "symptoms"


def _overlaps(root: Finding, other: Finding) -> bool:
    if root.job_id is None or root.job_id != other.job_id:
        return False
    if (root.bucket_start or root.window_start) != (other.bucket_start or other.window_start):
        return False
    if root.gpus and other.gpus:
        # GPU labels are per host; a host-less (job-level) finding overlaps every host
        same_host = root.host is None or other.host is None or root.host == other.host
        if not same_host or not set(root.gpus) & set(other.gpus):
            return False
    return root.window_start < other.window_end and other.window_start < root.window_end


def _summary(symptom: Finding) -> dict[str, Any]:
    return {
        "rule_id": symptom.rule_id,
        "title": symptom.title,
        "host": symptom.host,
        "gpus": list(symptom.gpus),
        "wasted_gpu_hours": round(symptom.wasted_gpu_hours, 4),
        "evidence": {k: v for k, v in symptom.evidence.items() if k != SYMPTOMS_KEY},
    }


def resolve(
    findings: Sequence[Finding], explains: Mapping[str, Sequence[str]] = EXPLAINS
) -> list[Finding]:
    """The findings with every symptom folded into the evidence of the root that explains it.

    `explains`: root -> symptoms, in precedence order (the built-in table, or that table with
    the installed rules' own relations merged in: analyzers.rule_cards.relations_of)."""
    rank = {rule: i for i, rule in enumerate(explains)}
    order = sorted(range(len(findings)), key=lambda i: rank.get(findings[i].rule_id, len(rank)))
    absorbed: dict[int, int] = {}  # symptom index -> root index
    for i in order:
        if i in absorbed:
            continue
        root = findings[i]
        symptoms_of_root = explains.get(root.rule_id, ())
        for j, other in enumerate(findings):
            if j == i or j in absorbed or other.rule_id not in symptoms_of_root:
                continue
            if _overlaps(root, other):
                absorbed[j] = i
    symptoms: dict[int, list[Finding]] = {}
    for j, i in absorbed.items():
        symptoms.setdefault(i, []).append(findings[j])
    out = []
    for i, f in enumerate(findings):
        if i in absorbed:
            continue
        if i in symptoms:
            listed = sorted(symptoms[i], key=lambda s: (s.rule_id, s.host or "", s.gpus))
            evidence = dict(f.evidence)
            evidence[SYMPTOMS_KEY] = [_summary(s) for s in listed]
            f = dataclasses.replace(f, evidence=evidence)
        out.append(f)
    return out


def detected_rules(findings: Iterable[Finding]) -> set[tuple[str | None, str]]:
    """(job_id, rule_id) of every rule that held, as a root or as a symptom (for evaluation)."""
    out: set[tuple[str | None, str]] = set()
    for f in findings:
        out.add((f.job_id, f.rule_id))
        for s in f.evidence.get(SYMPTOMS_KEY, ()) or ():
            out.add((f.job_id, str(s["rule_id"])))
    return out
