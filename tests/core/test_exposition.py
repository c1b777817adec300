"""The exposition parser: exact samples for every shape dcgm-exporter prints, the same samples as
prometheus_client on the shared pages, and errors that name the line."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
from prometheus_client.parser import text_string_to_metric_families

from fleetscope.errors import MetricsParseError
from fleetscope.exposition import ExpositionParser, Sample, parse

VARIANTS = ("a100_mig", "h100_k8s_release", "h100_slurm_main", "v100_legacy")


def prometheus_view(text: str) -> list[tuple[str, dict[str, str], float, float | None]]:
    """What our parser's samples look like through prometheus_client's counter renaming."""
    page = parse(text)
    return [
        (
            s.name + "_total"
            if page.types.get(s.name) == "counter" and not s.name.endswith("_total")
            else s.name,
            s.labels,
            s.value,
            s.timestamp,
        )
        for s in page.samples
    ]


def reference(text: str) -> list[tuple[str, dict[str, str], float, float | None]]:
    return [
        (s.name, s.labels, s.value, s.timestamp)
        for family in text_string_to_metric_families(text)
        for s in family.samples
    ]


@pytest.mark.parametrize("variant", VARIANTS)
def test_shared_pages_parse_exactly_as_prometheus_client(
    variant: str, page: Callable[[str], str]
) -> None:
    text = page(variant)
    assert prometheus_view(text) == reference(text)


def test_dcgm_line_with_spaces_after_commas() -> None:
    text = 'DCGM_FI_DEV_GPU_UTIL{gpu="0", uuid="GPU-1", Hostname="h"} 5\n'
    assert parse(text).samples == [
        Sample("DCGM_FI_DEV_GPU_UTIL", {"gpu": "0", "uuid": "GPU-1", "Hostname": "h"}, 5, None)
    ]


def test_escaped_label_values_and_timestamp() -> None:
    text = 'm{pod="a\\"b",path="c:\\\\d",note="x\\ny"} 1.5e3 1700000000123\n'
    (sample,) = parse(text).samples
    assert sample == Sample(
        "m", {"pod": 'a"b', "path": "c:\\d", "note": "x\ny"}, 1500.0, 1700000000.123
    )
    assert reference(text) == [(sample.name, sample.labels, sample.value, sample.timestamp)]


def test_values_keep_int_for_integer_literals_like_prometheus_client() -> None:
    page = parse("a 9223372036854775794\nb 0.25\nc NaN\nd +Inf\ne -Inf\nf 1e-3\n")
    values = [s.value for s in page.samples]
    assert values[0] == 9223372036854775794 and isinstance(values[0], int)
    assert values[1] == 0.25
    assert math.isnan(values[2])
    assert values[3:] == [math.inf, -math.inf, 0.001]


def test_help_and_type_are_recorded() -> None:
    page = parse("# HELP m  Some help\\nmore.\n# TYPE m counter\nm 3\n# just a comment\n")
    assert page.help == {"m": "Some help\nmore."}
    assert page.types == {"m": "counter"}


def test_label_cache_survives_between_pages_and_stays_correct() -> None:
    parser = ExpositionParser()
    first = parser.parse('m{gpu="0"} 1\nm{gpu="1"} 2\n')
    second = parser.parse('m{gpu="0"} 3\n')
    second.samples[0].labels["gpu"] = "mutated"
    third = parser.parse('m{gpu="0"} 4\n')
    assert [s.labels for s in first.samples] == [{"gpu": "0"}, {"gpu": "1"}]
    assert third.samples == [Sample("m", {"gpu": "0"}, 4, None)]


@pytest.mark.parametrize(
    ("text", "line_no", "message"),
    [
        ('ok 1\nm{gpu="0" 1\n', 2, "expected ',' between labels"),
        ("ok 1\n\nm{gpu=0} 1\n", 3, "has no quoted value"),
        ('m{gpu="0"}\n', 1, "expected a value"),
        ("m 1 2 3\n", 1, "expected a value and an optional timestamp"),
        ("m 1_000\n", 1, "1_000"),
        ("# TYPE m\n", 1, "TYPE line without a type"),
        ("# TYPE m flavour\n", 1, "unknown metric type"),
        ('m{a="1",a="2"} 1\n', 1, "duplicate label"),
        ("1m 5\n", 1, "invalid metric name"),
    ],
)
def test_errors_name_the_line(text: str, line_no: int, message: str) -> None:
    with pytest.raises(MetricsParseError) as info:
        parse(text)
    assert info.value.line_no == line_no
    assert message in str(info.value)
    assert str(info.value).startswith(f"line {line_no}: ")
