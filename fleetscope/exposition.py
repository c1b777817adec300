"""Prometheus text exposition (format 0.0.4) -> samples, fast enough to run every second.

What it is for: turning a dcgm-exporter or node_exporter `/metrics` page into `Sample`s with the
exact names, labels, values and timestamps that `prometheus_client.parser` gives for the same
valid page (a hypothesis test in tests/collector/test_exposition_property.py holds us to it), at a
small fraction of its cost (bench/agent.py measures both on the same pages).

How: one pass over `text.split("\\n")`. A sample line takes the fast path when it has a `{`, no
backslash, a name and label names we have already validated (cached per distinct label string:
an 8-GPU dcgm page has 8 distinct label strings for 300+ lines), and a value plus optional
timestamp. Anything else (escapes, `__name__` in braces, odd spacing) goes to a careful path that
follows the grammar as prometheus_client reads it. Values are `int` when the text is an integer
literal and `float` otherwise, exactly like prometheus_client; timestamps are the written
milliseconds divided by 1000.

Deliberate differences, all on input that format 0.0.4 calls invalid: UTF-8 quoted metric or label
names (format 1.0.0), exemplars, and lines with more than two fields after the labels are refused
with a `MetricsParseError` naming the line, where prometheus_client accepts some of them loosely.
prometheus_client also renames samples of counters not ending in `_total` (it appends `_total`
for its OpenMetrics model); we keep the names as written, and record each family's TYPE so that a
caller can apply that rename if it wants prometheus_client's view.

Must never: import anything beyond the standard library and fleetscope core, or swallow a parse
error silently.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from fleetscope.errors import MetricsParseError

__all__ = ["ExpositionParser", "Page", "Sample", "parse"]

_METRIC_NAME_RE = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*\Z")
# prometheus_client checks unquoted label names with the metric-name pattern (so ':' passes).
_ESCAPE_RE = re.compile(r'\\[\\n"]')
_HELP_ESCAPE_RE = re.compile(r"\\[\\n]")
_ESCAPES = {"\\\\": "\\", "\\n": "\n", '\\"': '"'}
# The whitespace prometheus_client splits comment lines on (string.whitespace).
_ASCII_WS = " \t\n\r\x0b\x0c"
_METRIC_TYPES = frozenset(
    {"counter", "gauge", "summary", "histogram", "gaugehistogram", "unknown", "info", "stateset"}
)
_CACHE_LIMIT = 4096  # distinct label strings kept between pages; a dcgm host has ~8-64


class Sample(NamedTuple):
    """One sample as written: `value` is int for integer literals, float otherwise."""

    name: str
    labels: dict[str, str]
    value: int | float
    timestamp: float | None


class Page(NamedTuple):
    """A parsed page: samples in page order, and the TYPE and HELP of each named family."""

    samples: list[Sample]
    types: dict[str, str]
    help: dict[str, str]


def _unescape(text: str) -> str:
    return _ESCAPE_RE.sub(lambda m: _ESCAPES[m.group(0)], text) if "\\" in text else text


def _valid_label_name(name: str) -> bool:
    return bool(_METRIC_NAME_RE.match(name)) and (not name.startswith("__") or name == "__name__")


def _separator_label(sep: str, *, first: bool) -> str | None:
    """The label name in the text between two quoted values (`,name=`), or None if malformed."""
    stripped = sep.strip()
    if not stripped.endswith("="):
        return None
    if not first:
        if not stripped.startswith(","):
            return None
        stripped = stripped[1:]
    name = stripped[:-1].strip()
    return name if _valid_label_name(name) and name != "__name__" else None


def _number(text: str) -> int | float:
    """A value or timestamp as prometheus_client reads it: int if it can be, else float."""
    if "_" in text:  # int() and float() accept 1_000; the format does not
        raise ValueError(text)
    if "." in text:
        return float(text)
    try:
        return int(text)
    except ValueError:
        return float(text)


def _value_and_timestamp(rest: str) -> tuple[int | float, float | None]:
    fields = rest.split()
    if len(fields) == 1:
        return _number(fields[0]), None
    if len(fields) == 2:
        return _number(fields[0]), _number(fields[1]) / 1000
    raise ValueError("expected a value and an optional timestamp")


# prometheus_client splits comment lines on string.whitespace into at most 4 parts; this regex
# does the same in one C-level match (the 4th part is the rest of the line, after the whitespace).
_WS = "[ \t\n\r\x0b\x0c]"
_NON_WS = "[^ \t\n\r\x0b\x0c]"
_COMMENT_RE = re.compile(
    f"({_NON_WS}+)(?:{_WS}+({_NON_WS}+)(?:{_WS}+({_NON_WS}+)(?:{_WS}+(.*))?)?)?{_WS}*\\Z",
    re.DOTALL,
)


def _split_comment(line: str) -> list[str]:
    """Split `# HELP name doc...` into at most 4 parts on ASCII whitespace, like prometheus_client."""
    match = _COMMENT_RE.match(line)
    if match is None:  # leading whitespace; lines are stripped, so only exotic cases get here
        match = _COMMENT_RE.match(line.lstrip(_ASCII_WS))
        if match is None:
            return []
    return [part for part in match.groups() if part is not None]


class ExpositionParser:
    """A reusable parser: keeps validated label strings between pages (bounded).

    Why a class: an agent parses the same exporter's page every second and the label strings
    repeat exactly; validating each distinct one once is most of the speed.
    """

    def __init__(self) -> None:
        self._labels_cache: dict[str, dict[str, str]] = {}
        self._names: set[str] = set()
        self._first_seps: dict[str, str] = {}  # ' gpu=' -> 'gpu'
        self._later_seps: dict[str, str] = {}  # ', uuid=' -> 'uuid'

    def parse(self, text: str) -> Page:
        samples: list[Sample] = []
        types: dict[str, str] = {}
        helps: dict[str, str] = {}
        append = samples.append
        cache = self._labels_cache
        names = self._names
        new_sample = tuple.__new__
        for line_no, raw in enumerate(text.split("\n"), start=1):
            line = raw.strip()
            if not line:
                continue
            if line[0] == "#":
                try:
                    self._comment(line, types, helps)
                except ValueError as exc:
                    raise MetricsParseError(str(exc), line_no=line_no, line=raw) from None
                continue
            brace = line.find("{")
            if brace > 0 and "\\" not in line:
                close = line.rfind("}")
                if close < brace:
                    close = len(line)  # unclosed: the careful path names the error
                name = line[:brace]
                labels_text = line[brace + 1 : close]
                labels = cache.get(labels_text)
                if labels is None:
                    labels = self._plain_labels(labels_text)
                if labels is not None and (name in names or self._new_name(name)):
                    fields = line[close + 1 :].split()
                    if len(fields) == 1 and "_" not in (v := fields[0]):
                        # the common case, inlined: a value and no timestamp
                        try:
                            value: int | float = float(v) if "." in v else int(v)
                        except ValueError:
                            pass
                        else:
                            append(new_sample(Sample, (name, labels.copy(), value, None)))
                            continue
                    try:
                        value, ts = _value_and_timestamp(line[close + 1 :])
                    except ValueError:
                        pass
                    else:
                        append(Sample(name, labels.copy(), value, ts))
                        continue
            try:
                append(self._careful(line))
            except ValueError as exc:
                raise MetricsParseError(
                    str(exc) or "invalid sample line", line_no=line_no, line=raw
                ) from None
        return Page(samples, types, helps)

    def _new_name(self, name: str) -> bool:
        if _METRIC_NAME_RE.match(name) is None:
            return False
        self._names.add(name)
        return True

    def _plain_labels(self, text: str) -> dict[str, str] | None:
        """Labels without backslashes, split on quotes; None sends the line to the careful path.

        Without escapes a value cannot contain a quote, so splitting on '"' alternates exactly
        between separators (`name=`, `,name=`, spaces allowed) and values.
        """
        parts = text.split('"')
        last = len(parts) - 1
        if last % 2 or last == 0 or parts[last].strip() not in ("", ","):
            return None
        labels: dict[str, str] = {}
        for k in range(0, last, 2):
            sep = parts[k]
            seps = self._later_seps if k else self._first_seps
            name = seps.get(sep)
            if name is None:
                name = _separator_label(sep, first=not k)
                if name is None:
                    return None
                seps[sep] = name
            if name in labels:
                return None
            labels[name] = parts[k + 1]
        if len(self._labels_cache) >= _CACHE_LIMIT:  # bounded memory on a churning exporter
            self._labels_cache.clear()
            self._names.clear()
            self._first_seps.clear()
            self._later_seps.clear()
        self._labels_cache[text] = labels
        return labels

    @staticmethod
    def _comment(line: str, types: dict[str, str], helps: dict[str, str]) -> None:
        parts = _split_comment(line)
        if len(parts) < 3 or parts[1] not in ("HELP", "TYPE"):
            return  # a plain comment
        name = parts[2]
        if '"' in name:
            raise ValueError("quoted (UTF-8) metric names are not supported")
        if not _METRIC_NAME_RE.match(name):
            raise ValueError(f"invalid metric name {name!r}")
        if parts[1] == "HELP":
            doc = parts[3] if len(parts) == 4 else ""
            helps[name] = _HELP_ESCAPE_RE.sub(lambda m: _ESCAPES[m.group(0)], doc)
        else:
            if len(parts) < 4:
                raise ValueError("TYPE line without a type")
            kind = "unknown" if parts[3] == "untyped" else parts[3]
            if kind not in _METRIC_TYPES:
                raise ValueError(f"unknown metric type {parts[3]!r}")
            types[name] = parts[3]

    def _careful(self, line: str) -> Sample:
        """The full grammar: escapes, spaces around names, `__name__` in braces, no labels."""
        brace = line.find("{")
        if brace < 0:
            fields = line.split(None, 1)
            if len(fields) < 2:
                raise ValueError("a sample needs a value")
            name = fields[0]
            if not _METRIC_NAME_RE.match(name):
                raise ValueError(f"invalid metric name {name!r}")
            value, ts = _value_and_timestamp(fields[1])
            return Sample(name, {}, value, ts)
        name = line[:brace].strip()
        labels, end = self._labels(line, brace + 1)
        if not name:
            if "__name__" not in labels:
                raise ValueError("a sample needs a metric name")
            name = labels.pop("__name__")
        elif "__name__" in labels:
            raise ValueError("metric name given twice")
        if not _METRIC_NAME_RE.match(name):
            raise ValueError(f"invalid metric name {name!r}")
        value, ts = _value_and_timestamp(line[end:])
        return Sample(name, labels, value, ts)

    def _labels(self, line: str, start: int) -> tuple[dict[str, str], int]:
        """Labels from `start` (after `{`) to the closing `}`; returns them and the index after."""
        labels: dict[str, str] = {}
        i, n = start, len(line)
        expect_comma = False
        while True:
            while i < n and line[i].isspace():
                i += 1
            if i >= n:
                raise ValueError("labels are not closed with '}'")
            if line[i] == "}":
                break
            if expect_comma:
                if line[i] != ",":
                    raise ValueError("expected ',' between labels")
                i += 1
                expect_comma = False
                continue
            eq = line.find("=", i)
            if eq < 0:
                raise ValueError("label without '='")
            label = line[i:eq].strip()
            if not _valid_label_name(label):
                raise ValueError(f"invalid label name {label!r}")
            i = eq + 1
            while i < n and line[i].isspace():
                i += 1
            if i >= n or line[i] != '"':
                raise ValueError(f"label {label!r} has no quoted value")
            j = i + 1
            while j < n and line[j] != '"':
                j += 2 if line[j] == "\\" else 1
            if j >= n:
                raise ValueError(f"label {label!r} value is not closed")
            if label in labels:
                raise ValueError(f"duplicate label {label!r}")
            labels[label] = _unescape(line[i + 1 : j])
            i = j + 1
            expect_comma = True
        return labels, i + 1


def parse(text: str) -> Page:
    """Parse one page with a fresh parser (no state carried between calls)."""
    return ExpositionParser().parse(text)
