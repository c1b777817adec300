"""What a rule says about itself besides its findings: its display name and where it stands among
causes and symptoms, so adding a rule is its module plus one entry-point line, nothing else.

A rule class (the object its `fleetscope.analyzers` entry point names) may carry, as class
attributes, all optional:

- `rule_names: Mapping[str, str]`: rule id -> the name a reader sees ("Low MFU"); without it the
  rule id is shown as is;
- `explains: Mapping[str, Sequence[str]]`: rule id -> the rule ids it is the root cause of
  (analyzers.rules.causes); these roots rank after the built-in precedence, in entry-point order;
- `explained_by: Mapping[str, Sequence[str]]`: rule id -> the roots that absorb it as a symptom
  (the usual case for a new, narrower rule: an idle job also has a low MFU, and the idle finding
  is the one to act on).

The built-ins keep their precedence table in analyzers.rules.causes (one cited order); the rules'
own declarations are merged into it here. Never reads telemetry; loads rule classes only through
analyzers.base.discover (fleetscope.plugins, the one loader).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from analyzers.rules.causes import EXPLAINS


def names_of(rules: Iterable[Any]) -> dict[str, str]:
    """rule id -> display name, from each rule's `rule_names`."""
    out: dict[str, str] = {}
    for rule in rules:
        out.update(_mapping(rule, "rule_names"))
    return out


def relations_of(
    rules: Iterable[Any], base: Mapping[str, Sequence[str]] = EXPLAINS
) -> dict[str, tuple[str, ...]]:
    """Root rule id -> the rule ids it explains, in precedence order: the built-in table first,
    then each rule's `explains`, with each rule's `explained_by` added to the roots it names."""
    out = {root: tuple(symptoms) for root, symptoms in base.items()}
    listed = list(rules)
    for rule in listed:
        for root, symptoms in _mapping(rule, "explains").items():
            out[root] = (*out.get(root, ()), *(s for s in symptoms if s not in out.get(root, ())))
    for rule in listed:
        for symptom, roots in _mapping(rule, "explained_by").items():
            for root in roots:
                if symptom not in out.get(root, ()):
                    out[root] = (*out.get(root, ()), symptom)
    return out


@functools.cache
def installed_names() -> dict[str, str]:
    """The display names every installed rule carries (read once per process)."""
    from analyzers.base import discover

    return names_of(discover().values())


def _mapping(rule: Any, attr: str) -> dict[str, Any]:
    found = getattr(rule, attr, None)
    return dict(found) if isinstance(found, Mapping) else {}
