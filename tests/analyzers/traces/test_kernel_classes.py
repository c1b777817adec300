"""Kernel classes by name (classify.py): fleetscope's communication class is what its words say,
for any ASCII name; and a frame classifies each GPU row by its name (frame.kernel_class)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from analyzers.traces.analyses.tensor_cores import tensor_core_names
from analyzers.traces.api import load_trace_set, run_analyses
from analyzers.traces.classify import KernelClass, classify_fleetscope
from tests.analyzers.traces.trace_paths import ALL_TRACES, trace_set

_WORDS = [
    "nccl", "NCCL", "ncclKernel", "NcclKERNEL", "hccl", "rccl", "RCCL", "c10d::", "C10D::",
    "msccl", "dpsk::ep::", "DPSK::EP::", "nvshmem", "NVSHMEM", "all", "All", "to", "_", "Gather",
    "gather", "reduce", "Reduce", "scatter", "Scatter", "kernel", "\\n", "\n", "::",
    "alltoall", "all_toall", "AllTo_All", "all_to_all", "AllGather", "reduceScatter",
    "reduce_scatter", "allreduce", "ALL_REDUCE", "ncc", "all_to", "_all",
]  # fmt: skip
_text = st.text(alphabet=st.sampled_from(list("acdeklnrstvAKLNS_: \n")), max_size=12)
_PREFIXES = ("nccl", "hccl", "rccl", "c10d::", "msccl")
_COMMUNICATION_WORDS = (
    "ncclkernel", "dpsk::ep::", "nvshmem", "alltoall", "all_toall", "allto_all", "all_to_all",
    "allgather", "reducescatter", "reduce_scatter", "allreduce", "all_reduce",
)  # fmt: skip


def _says_communication(name: str) -> bool:
    """An ASCII name starts with a collective library's prefix or holds a collective's word,
    in any case."""
    low = name.lower()
    return low.startswith(_PREFIXES) or any(w in low for w in _COMMUNICATION_WORDS)


def _is_communication(name: str) -> bool:
    return classify_fleetscope(name) is KernelClass.COMMUNICATION


@given(st.lists(st.one_of(_text, st.sampled_from(_WORDS)), max_size=6))
def test_the_communication_class_is_what_the_words_say(words: list[str]) -> None:
    name = "".join(words)
    assert _is_communication(name) == _says_communication(name), repr(name)


def test_the_communication_class_is_what_the_words_say_on_every_golden_name() -> None:
    names = sorted({n for d in ALL_TRACES for f in trace_set(d).frames() for n in f.names})
    names = [n for n in names if n.isascii()]
    assert len(names) > 1000
    assert [_is_communication(n) for n in names] == [_says_communication(n) for n in names]


@pytest.mark.parametrize("trace_dir", ALL_TRACES, ids=lambda p: p.name)
@pytest.mark.parametrize("hta_compatible", [True, False])
def test_every_gpu_row_has_its_names_class(trace_dir: Path, hta_compatible: bool) -> None:
    for frame in trace_set(trace_dir, hta_compatible=hta_compatible).frames():
        rows = frame.on_stream.nonzero()[0]
        expected = [int(frame.classifier(frame.names[frame.name[r]])) for r in rows]
        assert frame.kernel_class[rows].tolist() == expected


def test_a_kernel_without_a_name_reads_as_the_empty_name_whatever_the_last_symbol(
    tmp_path: Path,
) -> None:
    # A nameless row's symbol is -1, which read the last symbol's entry of each per-symbol table:
    # here a collective's with a tensor-core pattern, so the nameless kernel was communication,
    # matched "nccl" and ran on tensor cores.
    kernel = {"ph": "X", "cat": "kernel", "pid": 0, "tid": 7}
    events = [
        {**kernel, "name": "elementwise", "ts": 0, "dur": 5, "args": {"stream": 7}},
        {**kernel, "ts": 10, "dur": 5, "args": {"stream": 7}},
        {**kernel, "name": "ncclKernel_sm90_xmma", "ts": 20, "dur": 5, "args": {"stream": 7}},
    ]
    (tmp_path / "t.json").write_text(json.dumps({"traceEvents": events}))
    frame = load_trace_set(tmp_path / "t.json").ranks[0]
    assert frame.names[-1] == "ncclKernel_sm90_xmma"
    nameless = frame.name == -1
    assert nameless.sum() == 1
    assert frame.kernel_class[nameless].tolist() == [int(classify_fleetscope(""))]
    assert not frame.names_matching(lambda name: "nccl" in name)[nameless].any()
    assert not tensor_core_names(frame, frame.name[nameless]).any()
    assert not (frame.name == frame.sym("Stream Sync")).any()  # a name the trace lacks
    # The per-kernel tables name it "" too (top_kernels printed the collective's name for it).
    results = run_analyses(load_trace_set(tmp_path / "t.json"), names=["top_kernels"])
    named = {row[1]: row[3] for row in results["top_kernels"].table("top_kernels").rows}
    assert named == {"elementwise": 1, "": 1, "ncclKernel_sm90_xmma": 1}
