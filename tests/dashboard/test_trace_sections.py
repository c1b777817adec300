"""The Trace page draws every registered analysis from the stored document, generically (issue
29): an analysis module added to the registry shows on the page with no edit of the dashboard."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from analyzers.traces.analyses.base import REGISTRY, AnalysisResult, Table, analysis
from analyzers.traces.api import analyze_trace
from analyzers.traces.document import analysis_document
from analyzers.traces.frame import TraceSet
from dashboard.trace_report import analysis_sections, trace_view

DATA = Path(__file__).resolve().parents[1] / "data" / "traces"


@pytest.fixture
def new_analysis() -> Iterator[str]:
    """A module of another package, as it would register itself: kernels per stream."""

    @analysis("kernels_per_stream", "Kernels per stream (a plug-in)", None, "not in HTA")
    def kernels_per_stream(trace: TraceSet, options: object) -> AnalysisResult:
        rows = []
        for frame in trace.frames():
            streams = frame.stream[frame.on_stream]
            rows += [(frame.rank, int(s), int((streams == s).sum())) for s in sorted(set(streams))]
        return AnalysisResult(
            "kernels_per_stream",
            (Table("kernels_per_stream", ("rank", "stream", "kernels"), tuple(rows)),),
            notes=("counted on the GPU streams",),
        )

    yield "kernels_per_stream"
    del REGISTRY["kernels_per_stream"]


def test_a_newly_registered_analysis_shows_with_its_title_table_and_notes(
    new_analysis: str,
) -> None:
    document = analysis_document(analyze_trace(DATA / "kineto_resnet50_nw0"))
    view = trace_view(document)
    section = next(s for s in view.sections[0] if s.name == new_analysis)
    assert section.title == "Kernels per stream (a plug-in)"
    assert section.notes == ("counted on the GPU streams",)
    [(name, table)] = section.tables
    assert name == "kernels_per_stream" and list(table.columns) == ["stream", "kernels"]
    assert int(table["kernels"].sum()) == view.ranks[0].gpu_ops


def test_every_stored_analysis_has_a_section_in_report_order() -> None:
    document = analysis_document(analyze_trace(DATA / "hta_nccl_data_rank0"))
    sections = analysis_sections(document, 0)
    assert [s.name for s in sections] == list(document["analyses"])
    temporal = sections[0]
    assert temporal.title == "Temporal breakdown (GPU busy span)"
    [(_, table)] = temporal.tables
    assert "rank" not in table.columns and len(table) == 1


def test_an_analysis_no_longer_installed_still_shows_under_its_name() -> None:
    document = analysis_document(analyze_trace(DATA / "hta_amd_mi250_minitoy"))
    document["analyses"]["retired_analysis"] = {
        "tables": {"t": {"columns": ["rank", "x"], "rows": [[0, 1.5], [1, 2.0]]}},
        "per_rank": {},
        "notes": [],
    }
    section = analysis_sections(document, 0)[-1]
    assert section.title == "retired analysis"
    assert section.tables[0][1].to_dict("records") == [{"x": 1.5}]
