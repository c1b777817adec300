"""A rule carries its own display name and its place among causes and symptoms
(analyzers.rule_cards): a new rule is its module plus one entry-point line, and nothing central
learns about it."""

from __future__ import annotations

from datetime import timedelta
from typing import ClassVar

from analyzers.findings import Finding
from analyzers.plain import rule_name
from analyzers.rule_cards import installed_names, names_of, relations_of
from analyzers.rules.causes import EXPLAINS, resolve
from simulator.maker.series import T0


class NarrowRule:
    """What a new rule declares besides its findings."""

    rule_ids: ClassVar[tuple[str, ...]] = ("X1",)
    rule_names: ClassVar[dict[str, str]] = {"X1": "Narrow waste"}
    explained_by: ClassVar[dict[str, tuple[str, ...]]] = {"X1": ("R1", "R2")}


class RootRule:
    rule_ids: ClassVar[tuple[str, ...]] = ("X2",)
    explains: ClassVar[dict[str, tuple[str, ...]]] = {"X2": ("X1", "R6")}


def finding(rule: str) -> Finding:
    return Finding(
        rule_id=rule, severity="warn", job_id="j", host="h1", gpus=("0",), window_start=T0,
        window_end=T0 + timedelta(hours=1), title=rule, recommendation="-",
        wasted_gpu_hours=1.0, estimate_method="-", evidence={},
    )  # fmt: skip


def test_every_built_in_rule_names_itself() -> None:
    names = installed_names()
    assert {f"R{n}" for n in range(1, 18)} | {"P1", "P2", "P3"} <= set(names)
    assert rule_name("R1") == names["R1"] == "Zero utilization"
    assert rule_name("T4") == "GPU starvation"  # a trace rule: its function has no class
    assert names_of([NarrowRule, RootRule]) == {"X1": "Narrow waste"}


def test_without_declarations_the_built_in_precedence_is_unchanged() -> None:
    assert relations_of([]) == {root: tuple(s) for root, s in EXPLAINS.items()}
    assert list(relations_of([])) == list(EXPLAINS)  # the order is the precedence


def test_a_rule_declares_the_roots_that_absorb_it_and_the_symptoms_it_explains() -> None:
    relations = relations_of([NarrowRule, RootRule])
    assert relations["R1"] == (*EXPLAINS["R1"], "X1")
    assert relations["R2"] == (*EXPLAINS["R2"], "X1")
    assert list(relations)[-1] == "X2"  # a new root ranks after the built-ins
    out = resolve([finding("X1"), finding("R2")], relations)
    assert [f.rule_id for f in out] == ["R2"]
    assert [s["rule_id"] for s in out[0].evidence["symptoms"]] == ["X1"]
    # without the declarations, the new rule's finding stands alone
    assert sorted(f.rule_id for f in resolve([finding("X1"), finding("R2")])) == ["R2", "X1"]
