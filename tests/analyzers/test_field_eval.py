"""The independent evaluation (issue 13): a fleet written from real jobs' published behaviour,
day-old exporter pages attributed by labels only, found by the scheduler through arrival, scored
per rule and by root cause."""

from __future__ import annotations

import pytest

from app.field_eval import evaluate_field, render_field


# The whole pipeline over a day-old fleet: 234 s on a 2-core machine at load 30-40, close to the
# suite-wide 300 s that would cut it mid-query; its own limit is what it needs on a busy machine.
@pytest.mark.timeout(1200)
def test_the_field_fleet_meets_the_targets_with_the_right_root_causes_and_owners() -> None:
    report = evaluate_field()
    text = render_field(report)
    assert report.passed, text
    assert report.root_accuracy == 1.0 and not report.root_wrong, text
    assert {r: (s.tp, s.fp, s.fn) for r, s in report.scores.items() if s.tp or s.fp or s.fn} == {
        "P1": (2, 0, 0),
        "P4": (1, 0, 0),  # llm/ft-eager, a quarter of its team's median MFU; its peers not
        "R1": (1, 0, 0),
        "R5": (1, 0, 0),
        "R7": (1, 0, 0),
        "R8": (1, 0, 0),
        "R16": (2, 0, 0),
        "R17": (1, 0, 0),
    }
    # team from a pod label, else the namespace; Slurm account and user from the prolog record
    assert report.owners["vision/resnet-nw0"] == ("ann", "vision")
    assert report.owners["nlp/llama-ft"] == ("bo", "nlp-core")
    assert report.owners["speech/xid79"] == ("eve", "speech")
    assert report.owners["41950"] == ("dee", "chem")
    assert report.owners["llm/ft-eager"] == ("hal", "llm")
    # P4's precision and recall on this fleet, exactly
    p4 = report.scores["P4"]
    assert (p4.precision, p4.recall) == (1.0, 1.0), text
