"""Findings in plain language: the one formatter behind the CLI, the dashboard and every report.

A finding is stored as a rule code, a title, a fix and a JSON evidence object with epoch seconds,
fractions and a `_meta` block. A reader wants the rule's name, one sentence for the problem, one
for the fix, the GPU-hours a fix returns, and the evidence as a small table with units and human UTC
times. `plain(finding)` (or `plain_record(row)` for a catalog row) gives exactly that;
`fleetscope job`, the dashboard's job and fleet pages, and the weekly HTML, PDF, Markdown and
e-mail all lay out the same `PlainFinding`, so no two views word a finding differently. The raw
evidence stays available (`raw`) for an expander.

Evidence keys carry their unit in their suffix (style.md: `data_wait_s`, `wasted_gpu_hours`);
`UNITS` maps each suffix to a label and a formatter, so a new rule's evidence reads well without
touching this module. Never queries anything; no heavy imports.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from analyzers.findings import Finding

# The trace rules' names (shared/rules.md's T rules: functions, not rule classes). Every telemetry
# and pipeline rule carries its own (`rule_names` on its class: analyzers.rule_cards).
RULE_NAMES: dict[str, str] = {
    "T1": "Idle time",
    "T2": "Launch overhead",
    "T3": "Launch queue full",
    "T4": "GPU starvation",
    "T5": "Low-utilization stretches",
    "T6": "Pageable memory copies",
    "T7": "Synchronous calls in steps",
    "T8": "Data loader in the trace",
    "T9": "Communication heavy",
    "T10": "Tensor cores unused (trace)",
    "T11": "GPU memory near capacity",
    "T12": "DataParallel or gloo",
    "T13": "Grids smaller than the GPU",
}

META = "_meta"  # analyzers.run.results keeps title, job name, bucket and scope here
KWH, MONEY, CURRENCY = "recoverable_kwh", "recoverable_money", "currency"  # accounting.recoverable
NOT_ESTIMATED = "not estimated"  # how an estimate_method that puts no number on the waste begins
UNPRICED = "recoverable GPU-hours not estimated"
SYMPTOMS = "symptoms"  # analyzers.rules.causes.SYMPTOMS_KEY: the findings a root cause absorbed
MAX_ITEMS = 4  # list evidence shows this many items, then "+N more"
# A text value longer than this is cut with "…" (a CUDA kernel's demangled template name runs to
# hundreds of characters); the raw evidence keeps it whole. Identifiers are never cut: a person
# copies them into a shell or a search (a Kubernetes node's name passes 60 characters).
MAX_TEXT = 60  # as wide as `fleetscope trace analyze` prints a table cell
IDENTIFIERS = frozenset({"host", "hosts", "job", "job_id", "trace", "trace_id", "table"})


def rule_name(rule_id: str) -> str:
    """The name a reader sees: the installed rule's own, a trace rule's, else the id itself."""
    from analyzers.rule_cards import installed_names

    return installed_names().get(rule_id) or RULE_NAMES.get(rule_id, rule_id)


def utc_time(value: float | datetime) -> str:
    """24-hour UTC, to the minute: what every view prints for a moment."""
    moment = value if isinstance(value, datetime) else datetime.fromtimestamp(value, UTC)
    return f"{moment.astimezone(UTC):%Y-%m-%d %H:%M} UTC"


def utc_span(start: float | datetime, end: float | datetime) -> str:
    """`2026-11-24 15:20 to 16:30 UTC` (the date again only when the span crosses midnight)."""
    first, last = utc_time(start), utc_time(end)
    if first[:10] == last[:10]:
        return f"{first[:-4]} to {last[11:]}"
    return f"{first[:-4]} to {last}"


def number(value: float) -> str:
    """Rounded for reading: 3 significant digits, thousands separated, no float noise."""
    if value == 0 or not math.isfinite(value):
        return "0" if value == 0 else str(value)
    if float(value).is_integer() and abs(value) < 1e15:
        return f"{int(value):,}"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def money(value: float, currency: str) -> str:
    """`1,234.50 USD`: two decimals, the currency the prices are set in."""
    return f"{value:,.2f} {currency}".strip()


def _seconds(value: float) -> str:
    if abs(value) < 1:
        return f"{number(value * 1000)} ms"
    if abs(value) < 120:
        return f"{number(value)} s"
    if abs(value) < 7200:
        return f"{number(value / 60)} min"
    return f"{number(value / 3600)} h"


def _mib(value: float) -> str:
    return f"{number(value / 1024)} GiB" if abs(value) >= 1024 else f"{number(value)} MiB"


Formatter = Callable[[float], str]

# suffix -> (what the label drops, how the number reads); the longest matching suffix wins
UNITS: dict[str, Formatter] = {
    "_epoch_s": utc_time,
    "_gpu_hours": lambda v: f"{number(v)} GPU-h",
    "_gpu_h": lambda v: f"{number(v)} GPU-h",
    "_hours": lambda v: f"{number(v)} h",
    "_h": lambda v: f"{number(v)} h",
    "_share": lambda v: f"{number(100 * v)} %",
    "_frac": lambda v: f"{number(100 * v)} %",
    "_fraction": lambda v: f"{number(100 * v)} %",
    "_ratio": number,
    "_pct": lambda v: f"{number(v)} %",
    "_ms": lambda v: _seconds(v / 1000),
    "_us": lambda v: _seconds(v / 1e6),
    "_s": _seconds,
    "_min": lambda v: f"{number(v)} min",
    "_mib": _mib,
    "_gib": lambda v: f"{number(v)} GiB",
    "_gb": lambda v: f"{number(v)} GB",
    "_w": lambda v: f"{number(v)} W",
    "_kwh": lambda v: f"{number(v)} kWh",
    "_kg": lambda v: f"{number(v)} kg",
    "_c": lambda v: f"{number(v)} °C",
    "_mhz": lambda v: f"{number(v)} MHz",
}
_BY_LENGTH = sorted(UNITS, key=len, reverse=True)


# whole keys that carry their unit in their name alone
NAMED: dict[str, Formatter] = {
    "share": UNITS["_share"],
    "ratio": number,
    "compute_capability": lambda v: f"{v:.1f}",  # 9.0 (sm_90), as CUDA writes it, not "9"
}


def _unit(key: str) -> tuple[str, Formatter]:
    if key in NAMED:
        return key, NAMED[key]
    for suffix in _BY_LENGTH:
        if key.endswith(suffix) and len(key) > len(suffix):
            return key[: -len(suffix)], UNITS[suffix]
    return key, number


def label(key: str) -> str:
    """`data_wait_median_s` -> `data wait median`."""
    return _unit(key)[0].replace("_", " ").strip()


def value_text(key: str, value: Any) -> str:
    """One evidence value as a person reads it, its unit taken from the key's suffix."""
    if value is None:
        return "n/a"  # never "-": a table cell rendered as Markdown turns it into a bullet
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int | float):
        return _unit(key)[1](float(value))
    if isinstance(value, Mapping):
        return _mapping_text(key, value)
    if isinstance(value, Sequence) and not isinstance(value, str):
        return _list_text(key, value)
    text = str(value)
    if len(text) <= MAX_TEXT or key in IDENTIFIERS:
        return text
    return text[: MAX_TEXT - 1] + "…"


def _mapping_text(outer: str, value: Mapping[str, Any]) -> str:
    if {"from_epoch_s", "to_epoch_s"} <= set(value):
        rest = {k: v for k, v in value.items() if k not in ("from_epoch_s", "to_epoch_s")}
        parts = [_pairs(outer, rest), utc_span(value["from_epoch_s"], value["to_epoch_s"])]
        return " ".join(p for p in parts if p)
    return _pairs(outer, value)


def _pairs(outer: str, value: Mapping[str, Any]) -> str:
    """A number under a key without a unit takes the enclosing key's (T1's `per_stream_idle_us:
    {"host_wait": 8763}` read "host wait 8,763")."""
    shown = []
    for key, item in value.items():
        if item is None or item == [] or item == "":
            continue
        bare = _unit(key)[1] is number and isinstance(item, int | float)
        text = value_text(outer if bare else key, item)
        if key in ("table", "host"):
            shown.append(text)
        else:
            shown.append(f"{key}: {text}" if key.isdigit() else f"{label(key)} {text}")
    return ", ".join(shown)


def _list_text(key: str, items: Sequence[Any]) -> str:
    if not items:
        return "none"
    head = [value_text(key, item) for item in items[:MAX_ITEMS]]
    if key.endswith("_gpus") and all(isinstance(i, str | int) for i in items):
        head = [f"GPU {item}" for item in head]  # `idle gpus: 0` read as "no GPU idle"
    more = f" (+{len(items) - MAX_ITEMS} more)" if len(items) > MAX_ITEMS else ""
    separator = "; " if isinstance(items[0], Mapping) else ", "
    return separator.join(head) + more


# What a unit suffix measures, said when two keys would read alike (`idle_share`, `idle_us`).
KINDS: dict[str, str] = {
    **dict.fromkeys(("_share", "_frac", "_fraction", "_pct"), "share"),
    **dict.fromkeys(("_ms", "_us", "_s", "_min", "_hours", "_h"), "time"),
    **dict.fromkeys(("_gpu_hours", "_gpu_h"), "GPU-hours"),
    **dict.fromkeys(("_mib", "_gib", "_gb"), "memory"),
}


def evidence_rows(evidence: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The evidence as (what, value) rows; `samples` (where the rows are) reads as 'data'. Keys
    that differ only in their unit (`idle_share` and `idle_us`) keep what the unit measures."""
    keys = [k for k in evidence if k not in (META, CURRENCY)]
    labels = [label(k) for k in keys]
    rows = []
    for key, what in zip(keys, labels, strict=True):
        value = evidence[key]
        if key == "samples" and isinstance(value, Mapping):
            rows.append(("data", _mapping_text(key, value)))
            continue
        if key == SYMPTOMS and _summaries(value):
            rows += [_symptom_row(symptom) for symptom in value]
            continue
        if key == MONEY and isinstance(value, int | float):
            rows.append((what, money(float(value), str(evidence.get(CURRENCY, "")))))
            continue
        if labels.count(what) > 1:
            suffix = next((s for s in _BY_LENGTH if key.endswith(s) and len(key) > len(s)), "")
            what = f"{what} {KINDS.get(suffix, suffix.strip('_'))}".strip()
        rows.append((what, value_text(key, value)))
    return rows


def _summaries(value: Any) -> bool:
    return isinstance(value, Sequence) and all(
        isinstance(item, Mapping) and {"rule_id", "title"} <= set(item) for item in value
    )


def _symptom_row(symptom: Mapping[str, Any]) -> tuple[str, str]:
    """An absorbed finding as one row: its rule, its own line and hours, its own evidence (its
    job, host, GPUs and data are the root's, shown above)."""
    hours = symptom.get("wasted_gpu_hours")
    parts = [str(symptom["title"])]
    if isinstance(hours, int | float):
        parts.append(f"{number(float(hours))} GPU-h")
    evidence = symptom.get("evidence")
    if isinstance(evidence, Mapping):
        own = _pairs(
            "", {k: v for k, v in evidence.items() if k not in ("samples", META, SYMPTOMS)}
        )
        parts.append(own)
    return f"also {symptom['rule_id']}", " · ".join(p for p in parts if p)


@dataclass(frozen=True)
class PlainFinding:
    rule_id: str
    rule: str  # the rule's name
    severity: str
    problem: str  # one line
    fix: str
    gpu_hours: float  # recoverable
    estimate: str  # how the GPU-hours were estimated
    job_id: str | None
    host: str | None
    gpus: tuple[str, ...]
    when: str  # the finding's window, in UTC
    evidence: list[tuple[str, str]] = field(default_factory=list)
    raw: dict[str, Any] = field(default_factory=dict)

    @property
    def estimated(self) -> bool:
        return priced(self.estimate)

    @property
    def gain(self) -> str:
        """The heading's last part: what a fix returns, or that nobody estimated it."""
        return f"{self.recoverable} recoverable" if self.estimated else UNPRICED

    @property
    def recoverable(self) -> str:
        """What a fix returns: GPU-hours, and the kWh and money beside them where known
        (analyzers.accounting.recoverable)."""
        parts = [f"{number(self.gpu_hours)} GPU-h"]
        kwh, cost = self.raw.get(KWH), self.raw.get(MONEY)
        if isinstance(kwh, int | float):
            parts.append(f"{number(float(kwh))} kWh")
        if isinstance(cost, int | float):
            parts.append(money(float(cost), str(self.raw.get(CURRENCY, ""))))
        return " · ".join(parts)

    @property
    def where(self) -> str:
        parts = [f"job {self.job_id}" if self.job_id else "", self.host or ""]
        if self.gpus:
            parts.append(f"GPU {', '.join(self.gpus)}")
        return ", ".join(p for p in parts if p)


def priced(estimate_method: str) -> bool:
    """False where the rule puts no number on the waste (R15's communication time, a trace
    rule with no step to replay): its 0 GPU-h means unknown, not nothing to recover."""
    return not estimate_method.startswith(NOT_ESTIMATED)


def plain(finding: Finding) -> PlainFinding:
    return PlainFinding(
        rule_id=finding.rule_id,
        rule=rule_name(finding.rule_id),
        severity=str(finding.severity),
        problem=finding.title or rule_name(finding.rule_id),
        fix=finding.recommendation,
        gpu_hours=finding.wasted_gpu_hours,
        estimate=finding.estimate_method,
        job_id=finding.job_id,
        host=finding.host,
        gpus=finding.gpus,
        when=utc_span(finding.window_start, finding.window_end),
        evidence=evidence_rows(finding.evidence),
        raw=dict(finding.evidence),
    )


def _opt(value: Any) -> str | None:
    if value is None or (isinstance(value, float) and math.isnan(value)) or value == "":
        return None
    return str(value)


def _moment(value: Any) -> datetime | None:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    if hasattr(value, "to_pydatetime"):
        value = value.to_pydatetime()
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    return None


def plain_record(record: Mapping[Any, Any]) -> PlainFinding:
    """A catalog `findings` row (a dict, evidence as JSON text or a mapping) in plain language."""
    evidence = record.get("evidence") or {}
    if isinstance(evidence, str):
        evidence = json.loads(evidence)
    meta = evidence.get(META) or {}
    rule_id = str(record.get("rule_id") or "?")
    gpus = record.get("gpus")
    if isinstance(gpus, str):
        gpus = json.loads(gpus) if gpus.startswith("[") else [gpus]
    start, end = _moment(record.get("window_start")), _moment(record.get("window_end"))
    return PlainFinding(
        rule_id=rule_id,
        rule=rule_name(rule_id),
        severity=str(record.get("severity") or ""),
        problem=str(meta.get("title") or record.get("title") or rule_name(rule_id)),
        fix=str(record.get("recommendation") or ""),
        gpu_hours=float(record.get("wasted_gpu_hours") or 0.0),
        estimate=str(record.get("estimate_method") or ""),
        job_id=_opt(record.get("job_id")),
        host=_opt(record.get("host")),
        gpus=tuple(str(g) for g in (gpus if isinstance(gpus, list | tuple) else [])),
        when=utc_span(start, end) if start and end else "",
        evidence=evidence_rows(evidence),
        raw=dict(evidence),
    )


def to_text(p: PlainFinding, indent: str = "  ") -> str:
    """The CLI's form (`fleetscope job`): heading, problem, fix, then the evidence table."""
    width = max((len(what) for what, _ in p.evidence), default=0)
    lines = [
        f"{indent}{p.rule_id:<4} {p.rule} · {p.severity} · {p.gain}",
        f"{indent}     problem: {p.problem}",
        f"{indent}     fix: {p.fix}",
    ]
    if p.where or p.when:
        lines.append(f"{indent}     where: {', '.join(x for x in (p.where, p.when) if x)}")
    lines += [f"{indent}       {what:<{width}}  {value}" for what, value in p.evidence]
    return "\n".join(lines)


def without_gpus(p: PlainFinding) -> PlainFinding:
    """`p` for a job that holds no GPU (no GPU sample: a CPU-only process): no recoverable
    GPU-hours, and the estimate says why (a step rule assumes one GPU per rank; issue 31)."""
    if not p.gpu_hours:
        return p
    return replace(
        p,
        gpu_hours=0.0,
        estimate=f"none: the job holds no GPU (the rule's {number(p.gpu_hours)} GPU-h assume "
        "one GPU per rank)",
    )
