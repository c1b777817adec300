"""Turn a `TraceReport` into JSON-ready data or a plain-text report (what the CLI prints).

Per-launch tables (one row per kernel launch, thousands of rows) are summarized by the
`launch_summary` table in both forms; the full rows stay available from the API. NaN becomes null in JSON. Never reads files, never computes analyses.
"""

from __future__ import annotations

import functools
import math
import re
import struct
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from analyzers.traces.analyses import load_registry
from analyzers.traces.analyses.base import Table
from analyzers.traces.api import TraceReport
from analyzers.traces.frame import Mode

__all__ = ["json_ready", "render_text", "report_json", "report_to_dict"]

MAX_TEXT_ROWS = 12


def _is_detail(table: Table) -> bool:
    return table.name.startswith("cuda_kernel_launch_stats_rank")


def json_ready(value: Any, *, finite: bool = False) -> Any:
    """Plain JSON values: NaN null, numpy scalars plain; with `finite`, infinities null too (the
    stored document: PostgreSQL's JSON refuses them; the CLI's JSON keeps them as it always has)."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and (math.isnan(value) or (finite and math.isinf(value))):
        return None
    if isinstance(value, dict):
        return {str(k): json_ready(v, finite=finite) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_ready(v, finite=finite) for v in value]
    return value


def _report_data(report: TraceReport) -> dict[str, Any]:
    """The report as dicts and lists, values as the analyses left them (numpy scalars, NaN)."""
    registry = load_registry()
    trace = report.trace
    analyses = {}
    for name, result in report.results.items():
        spec = registry[name]
        analyses[name] = {
            "title": spec.title,
            "hta_api": spec.hta_api,
            "differs_from_hta": spec.beyond_hta if trace.mode is Mode.NATIVE else None,
            "tables": {t.name: t.records() for t in result.tables if not _is_detail(t)},
            "per_rank": result.per_rank,
            "notes": list(result.notes),
        }
    return {
        "source": str(trace.source),
        "mode": str(trace.mode),
        "ranks": sorted(trace.ranks),
        "files": {r: f.path.name for r, f in trace.ranks.items()},
        "notes": trace.notes,
        "analyses": analyses,
        "findings": [f.to_dict() for f in report.findings],
    }


def report_to_dict(report: TraceReport) -> dict[str, Any]:
    data: dict[str, Any] = json_ready(_report_data(report))
    return data


def report_json(reports: Sequence[TraceReport]) -> str:
    """The CLI's `--format json`: one report's `report_to_dict` (a list of them for several), as
    `json.dumps(..., indent=1)` writes it, byte for byte.

    Made by msgspec in C where it writes exactly those bytes: the stdlib encoder with an indent
    is pure Python (with `json_ready`'s walk 2.3 ms of resnet50_nw0's run, msgspec 1.1 ms; issue
    19 times the command whole). msgspec writes NaN as null (as `json_ready` makes it) and numpy
    scalars through `_plain`; a float with an exponent or below 1e-4 is rewritten as Python
    writes it; what it would write differently goes to the stdlib instead: an infinity
    (msgspec: null, the CLI: `Infinity`), non-ASCII text (the stdlib escapes it), control
    characters and DEL, anything it cannot encode.
    """
    raw = [_report_data(r) for r in reports]
    data = raw[0] if len(raw) == 1 else raw
    # Only where the process has msgspec already (it loaded a file in process): its import
    # (~7 ms) costs more than the stdlib writes slower (~1.2 ms).
    text = _msgspec_json(data) if "msgspec" in sys.modules else None
    if text is None:
        import json  # only here: msgspec writes the rest (the json module is ~1.7 ms to import)

        text = json.dumps(json_ready(data), indent=1)
    return text + "\n"


# A number msgspec writes otherwise than `float.__repr__`: with an exponent (msgspec `1e16`,
# `1e-7`; Python `1e+16`, `1e-07`) or below 1e-4 (msgspec `0.0000853`, Python `8.53e-05`). Matched
# after `:`, `,` or `[` in the compact text; a match inside a string only costs the rewrite below.
# Compiled on first use (re's cache): the stdlib writes the JSON of a command that has no msgspec.
_ODD_FLOAT = rb"[:,\[]-?(?:[0-9.]+e|0\.0000)"


@functools.cache
def _string_or_number() -> re.Pattern[bytes]:
    """The rewrite's tokens: a whole string (left as it is, so nothing inside one is touched) or
    a number after `:`, `,` or `[` (compact JSON has no spaces). Compiled on first use: a report
    with no float to rewrite never needs it."""
    return re.compile(rb'"(?:[^"\\]|\\.)*"|(?<=[:,\[])-?[0-9][0-9.eE+-]*')


# An infinity as msgpack writes a float: 0xcb and the IEEE 754 double, big-endian.
_INFINITIES = tuple(b"\xcb" + struct.pack(">d", v) for v in (math.inf, -math.inf))


def _plain(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON")


def _msgspec_json(data: Any) -> str | None:
    """`data` as `json.dumps(json_ready(data), indent=1)` writes it, or None where msgspec would
    write anything else. Infinities are found in the msgpack form of the same data (JSON has
    none): a false match there only sends the data to the stdlib."""
    try:
        import msgspec
    except ModuleNotFoundError:  # msgspec comes with the `server` extra
        return None
    try:
        packed = msgspec.msgpack.encode(data, enc_hook=_plain)
        compact = msgspec.json.encode(data, enc_hook=_plain)
    except (TypeError, ValueError, OverflowError, msgspec.EncodeError):
        return None
    if any(inf in packed for inf in _INFINITIES):
        return None
    if not compact.isascii() or b"\x7f" in compact or b"\\u" in compact:
        return None
    if re.search(_ODD_FLOAT, compact):
        compact = _string_or_number().sub(_as_python_writes, compact)
    return msgspec.json.format(compact, indent=1).decode()


def _as_python_writes(token: re.Match[bytes]) -> bytes:
    """A float token as `float.__repr__` writes it (msgspec's digits are the shortest that read
    back as the same double, so `float()` of them is exact); strings and integers unchanged."""
    text = token.group()
    if text[:1] == b'"' or not (b"e" in text or b"." in text):
        return text
    return repr(float(text)).encode()


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        if math.isnan(value):
            return "-"
        if value.is_integer() and abs(value) < 1e15:
            return f"{int(value)}"
        return f"{value:.4g}" if abs(value) < 1e4 else f"{value:.0f}"
    text = str(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _table_text(table: Table) -> list[str]:
    if not table.rows:
        return [f"  ({table.name}: no rows)"]
    cells = [[_fmt(v) for v in row] for row in table.rows[:MAX_TEXT_ROWS]]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(table.columns)]
    lines = ["  " + "  ".join(c.ljust(w) for c, w in zip(table.columns, widths, strict=True))]
    lines += ["  " + "  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)) for r in cells]
    if len(table.rows) > MAX_TEXT_ROWS:
        lines.append(f"  ... {len(table.rows) - MAX_TEXT_ROWS} more rows (--format json for all)")
    return lines


def render_text(report: TraceReport) -> str:
    registry = load_registry()
    trace = report.trace
    mode = "HTA 0.5.0 compatible" if trace.mode is Mode.HTA else "fleetscope definitions"
    out = [f"trace {trace.source}  ranks {sorted(trace.ranks)}  ({mode})"]
    out += [f"note: {n}" for n in trace.notes]
    for name, result in report.results.items():
        spec = registry[name]
        out.append("")
        out.append(f"== {spec.title}" + (f"  [HTA: {spec.hta_api}]" if spec.hta_api else ""))
        if trace.mode is Mode.NATIVE and spec.hta_api:
            out.append(f"  differs from HTA: {spec.beyond_hta}")
        for table in result.tables:
            if not _is_detail(table):
                out += _table_text(table)
        out += [f"  note: {n}" for n in result.notes]
    out.append("")
    out.append(f"== Findings ({len(report.findings)})")
    for f in report.findings:
        out.append(
            f"  [{f.rule_id} {f.severity}] {f.title}"
            + (f"  (~{f.wasted_gpu_hours:.1f} GPU-h/week)" if f.wasted_gpu_hours else "")
        )
        out.append(f"      fix: {f.recommendation}")
    return "\n".join(out)
