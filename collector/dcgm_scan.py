"""dcgm-exporter page text -> GpuReadings in one pass, without building a Sample per line.

What it is for: the agent reads the same exporter page every second, and from one second to the
next only the values change: every sample line is `<name>{<labels>} <value>` with the same
`<name>{<labels>}` text as last second, and the HELP/TYPE lines are identical. So the first time a
line's text before its last space is seen, it goes through the full parser
(exposition.ExpositionParser) and normalisation rules (normalize.py), and what they decided (which
GPU, which column or `extra` key, or "not a per-GPU DCGM series") is kept under that text. Every
later page is then one `split("\\n")` and, per line, one dict lookup and one number conversion.
This took the agent's scrape + parse + normalize from about 1.4 ms to about 0.3 ms per 8 GPUs x
40 fields page (bench/agent.py, bench/RESULTS.md).

Contract: `scan(text, ...)` returns exactly `normalize_samples(ExpositionParser().parse(text)
.samples, ...)`, or raises the same MetricsParseError (tests/collector/test_dcgm_scan.py holds
it to that on the shared pages, simulator pages and generated ones). A line takes the cached path
only when its prefix was validated and its value is a plain number as the parser reads it;
anything else (timestamps, escapes, new label sets, odd spacing, errors) goes line by line through
the full parser, and an error is re-raised from a full parse so that it names the right line.

Must never: accept a line the full parser refuses, keep more than `cache_limit` prefixes, or share
a labels dict between readings of different scrapes.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from fleetscope.dcgm_fields import FIELDS, is_blank
from fleetscope.errors import MetricsParseError
from fleetscope.exposition import ExpositionParser, Sample
from fleetscope.normalize import GpuReading, finish_readings, new_reading, series_key

__all__ = ["DcgmScanner"]

_NEG_INF = float("-inf")
_FP64_BLANK = 140737488355328.0  # below this (and above -inf) a value cannot be a DCGM blank

# `} <value>\n` where the value is a number that float() alone reads exactly as the parser does:
# integers and decimals as dcgm-exporter prints them (%d, %f), optional exponent; never "_", the
# NaN/Inf words, or a negative-zero integer such as "-0" (the parser reads that as int 0 -> +0.0).
_PLAIN_VALUE = r"(?:0|-?[1-9][0-9]*|-?[0-9]+\.[0-9]*)(?:[eE][-+]?[0-9]+)?"
_VALUE_SPLIT = re.compile(r"\} (" + _PLAIN_VALUE + r")\n")


class _Series(NamedTuple):
    """What the full parser and normalize.py decided for one `<name>{<labels>}` text."""

    key: tuple[str, str] | None  # (gpu, GPU_I_ID); None: valid, but not a per-GPU DCGM series
    labels: dict[str, str]  # never handed out: each reading gets a copy
    column: str | None  # gpu_samples column, or None for `extra`
    scale: float
    name: str


class _Shape(NamedTuple):
    """A validated page with its values cut out: the same shape again needs no line parsing."""

    skeleton: list[str]  # the text between values (comments, names and labels), in page order
    gpus: list[tuple[tuple[str, str], dict[str, str]]]  # (key, labels) in first appearance
    steps: list[tuple[int, str | None, float, str] | None]  # per value: reading, column, scale
    # (cluster, host) -> each GPU's row before its values and ts: copied per scrape, never handed
    # out (new_reading's label lookups once per shape, not per GPU per scrape)
    rows: dict[tuple[str, str | None], list[dict[str, object]]]


class DcgmScanner:
    """Reused across scrapes of one exporter; the caches are what make it fast.

    Two levels: (1) when a page has exactly the shape of the last fully validated one (same text
    around every value, every value a plain number), its values are read straight into the
    readings by position; (2) otherwise lines are read one by one, known line prefixes from the
    cache and new ones through the full parser, and the page's shape is remembered for (1).
    """

    def __init__(self, cache_limit: int = 8192) -> None:
        self._parser = ExpositionParser()
        self._series: dict[str, _Series] = {}
        self._comments: set[str] = set()
        self._cache_limit = cache_limit
        self._shape: _Shape | None = None

    def scan(
        self, text: str, *, ts_ms: int, cluster: str, host: str | None = None
    ) -> list[GpuReading]:
        """The readings of one page; MetricsParseError (naming the line) if it is invalid."""
        parts = _VALUE_SPLIT.split(text)
        shape = self._shape
        if shape is not None and parts[0::2] == shape.skeleton:
            return _apply_shape(shape, parts[1::2], ts_ms, cluster, host)
        readings, sample_lines = self._scan_lines(text, ts_ms, cluster, host)
        self._shape = self._shape_of(parts, sample_lines)
        return readings

    def _shape_of(self, parts: list[str], sample_lines: int) -> _Shape | None:
        """The shape of a page that just passed line by line, if every sample line is one of
        its plain values at a cached prefix; None (no shortcut next time) otherwise."""
        skeleton = parts[0::2]
        if len(skeleton) - 1 != sample_lines:
            return None
        index: dict[tuple[str, str], int] = {}
        gpus: list[tuple[tuple[str, str], dict[str, str]]] = []
        steps: list[tuple[int, str | None, float, str] | None] = []
        for chunk in skeleton[:-1]:
            series = self._series.get(chunk[chunk.rfind("\n") + 1 :] + "}")
            if series is None:
                return None
            if series.key is None:
                steps.append(None)
                continue
            if series.key not in index:
                index[series.key] = len(gpus)
                gpus.append((series.key, series.labels))
            steps.append((index[series.key], series.column, series.scale, series.name))
        return _Shape(skeleton, gpus, steps, {})

    def _scan_lines(
        self, text: str, ts_ms: int, cluster: str, host: str | None
    ) -> tuple[list[GpuReading], int]:
        """Line by line; returns the readings and how many lines were samples."""
        readings: dict[tuple[str, str], GpuReading] = {}
        sample_lines = 0
        series_get = self._series.get
        comments = self._comments
        for line in text.split("\n"):
            cut = line.rfind(" ")
            series = series_get(line[:cut]) if cut > 0 else None
            if series is None:
                if line in comments or not line.strip():
                    continue
                sample_lines += self._slow_line(text, line, cut, readings, ts_ms, cluster, host)
                continue
            sample_lines += 1
            key, labels, column, scale, name = series
            value_text = line[cut + 1 :]
            # The parser's number rule (exposition._number): no "_", int literal or float.
            try:
                if "_" in value_text:
                    raise ValueError(value_text)
                if "." in value_text:
                    value = float(value_text)
                else:
                    try:
                        value = float(int(value_text))
                    except ValueError:
                        value = float(value_text)
            except (ValueError, OverflowError):
                self._slow_line(text, line, cut, readings, ts_ms, cluster, host)
                continue
            if key is None:
                continue
            reading = readings.get(key)
            if reading is None:
                reading = readings[key] = new_reading(
                    dict(labels), ts_ms=ts_ms, cluster=cluster, host=host
                )
            if not (_NEG_INF < value < _FP64_BLANK) and is_blank(value):
                continue
            if column is None:
                reading.extra[name] = value
            else:
                reading.row[column] = value * scale
        return finish_readings(readings), sample_lines

    def _slow_line(
        self,
        text: str,
        line: str,
        cut: int,
        readings: dict[tuple[str, str], GpuReading],
        ts_ms: int,
        cluster: str,
        host: str | None,
    ) -> int:
        """A line not seen before (or unusual): the full parser, then remember its prefix.
        Returns 1 for a sample line, 0 for a comment."""
        try:
            page = self._parser.parse(line)
        except MetricsParseError:
            self._parser.parse(text)  # the same error, with the page's line number
            raise
        if not page.samples:  # a comment (HELP, TYPE or plain), validated: remember the line
            if len(self._comments) >= self._cache_limit:
                self._comments.clear()
            self._comments.add(line)
            return 0
        (sample,) = page.samples
        series = _series_for(sample)
        if series.key is not None:
            _apply(sample, series, series.key, readings, ts_ms, cluster, host)
        prefix = line[:cut] if cut > 0 else ""
        cacheable = prefix.endswith("}") and "{" in prefix and prefix == prefix.lstrip()
        if sample.timestamp is None and cacheable:
            if len(self._series) >= self._cache_limit:
                self._series.clear()
            self._series[prefix] = series
        return 1


def _apply_shape(
    shape: _Shape, values: list[str], ts_ms: int, cluster: str, host: str | None
) -> list[GpuReading]:
    """normalize_samples' result for a page of a known shape, from its values alone."""
    templates = shape.rows.get((cluster, host))
    if templates is None:
        if len(shape.rows) >= 4:
            shape.rows.clear()
        templates = shape.rows[(cluster, host)] = [
            new_reading(dict(labels), ts_ms=0, cluster=cluster, host=host).row
            for _, labels in shape.gpus
        ]
    readings: dict[tuple[str, str], GpuReading] = {}
    for (key, labels), template in zip(shape.gpus, templates, strict=True):
        row = template.copy()
        row["ts"] = ts_ms
        readings[key] = GpuReading(row, dict(labels))
    rows = [r.row for r in readings.values()]
    extras = [r.extra for r in readings.values()]
    for step, value_text in zip(shape.steps, values, strict=True):
        if step is None:
            continue
        value = float(value_text)
        if not (_NEG_INF < value < _FP64_BLANK) and is_blank(value):
            continue
        at, column, scale, name = step
        if column is None:
            extras[at][name] = value
        else:
            rows[at][column] = value * scale
    return finish_readings(readings)


def _series_for(sample: Sample) -> _Series:
    spec = FIELDS.get(sample.name)
    column, scale = (spec.column, spec.scale) if spec is not None else (None, 1.0)
    return _Series(series_key(sample), sample.labels, column, scale, sample.name)


def _apply(
    sample: Sample,
    series: _Series,
    key: tuple[str, str],
    readings: dict[tuple[str, str], GpuReading],
    ts_ms: int,
    cluster: str,
    host: str | None,
) -> None:
    """normalize_samples' step for one sample that came through the full parser."""
    reading = readings.get(key)
    if reading is None:
        reading = readings[key] = new_reading(
            dict(series.labels), ts_ms=ts_ms, cluster=cluster, host=host
        )
        if sample.timestamp is not None:
            reading.row["ts"] = round(sample.timestamp * 1000)
    value = float(sample.value)
    if is_blank(value):
        return
    if series.column is None:
        reading.extra[series.name] = value
    else:
        reading.row[series.column] = value * series.scale
