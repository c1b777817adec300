"""Property: on any valid exposition page, our parser gives exactly prometheus_client's samples.

Pages are generated family by family (optional HELP with escapes, optional TYPE, 1-4 samples) with
label values full of quotes, backslashes, newlines, commas, braces and non-ASCII; values as
integers, %f / repr / exponent floats, NaN and infinities; optional millisecond timestamps; with
and without spaces after commas and trailing commas. prometheus_client renames counter samples not
ending in `_total`; `as_prometheus_client_sees_it` applies that documented rename to ours.
"""

from __future__ import annotations

import string

from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from fleetscope.exposition import parse

NAME_START = string.ascii_letters + "_:"
NAME_REST = string.ascii_letters + string.digits + "_:"

metric_names = st.builds(
    lambda a, b: a + b,
    st.sampled_from(NAME_START),
    st.text(alphabet=NAME_REST, max_size=12),
)
label_names = st.builds(
    lambda a, b: a + b,
    st.sampled_from(string.ascii_letters),  # never a reserved "__" name
    st.text(alphabet=string.ascii_letters + string.digits + "_", max_size=8),
)
raw_text = st.text(
    alphabet=st.one_of(
        st.sampled_from('"\\\n,{}= #\tabc'),
        st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n"),
    ),
    max_size=16,
)
help_text = st.text(
    alphabet=st.one_of(
        st.sampled_from('"\\ #\tabc'),
        st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n"),
    ),
    max_size=24,
)


def escape_label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def escape_help(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n")


values = st.one_of(
    st.integers(min_value=-(10**20), max_value=10**20).map(str),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.floats(allow_nan=False, allow_infinity=False, min_value=-1e12, max_value=1e12).map(
        lambda f: f"{f:f}"
    ),
    st.floats(allow_nan=False, allow_infinity=False).map(lambda f: f"{f:e}"),
    st.sampled_from(["NaN", "+Inf", "-Inf", "Inf", "9223372036854775794"]),
)
timestamps = st.one_of(st.none(), st.integers(min_value=-(2**53), max_value=2**53).map(str))


@st.composite
def sample_lines(draw: st.DrawFn, name: str) -> str:
    names = draw(st.lists(label_names, unique=True, max_size=5))
    sep = draw(st.sampled_from([",", ", "]))
    labels = sep.join(f'{n}="{escape_label(draw(raw_text))}"' for n in names)
    if names and draw(st.booleans()):
        labels += ","
    braces = f"{{{labels}}}" if names or draw(st.booleans()) else ""
    ts = draw(timestamps)
    return f"{name}{braces} {draw(values)}" + (f" {ts}" if ts is not None else "")


@st.composite
def pages(draw: st.DrawFn) -> str:
    names = draw(st.lists(metric_names, unique=True, min_size=1, max_size=5))
    lines: list[str] = []
    for name in names:
        if draw(st.booleans()):
            lines.append(f"# HELP {name} {escape_help(draw(help_text))}")
        kind = draw(st.sampled_from([None, "counter", "gauge", "untyped"]))
        if kind:
            lines.append(f"# TYPE {name} {kind}")
        lines += [draw(sample_lines(name)) for _ in range(draw(st.integers(1, 4)))]
        if draw(st.booleans()):
            lines.append("")
    return "\n".join(lines) + "\n"


def canonical(value: float) -> tuple[str, str]:
    return type(value).__name__, repr(value)


def as_prometheus_client_sees_it(text: str) -> list[tuple[object, ...]]:
    page = parse(text)
    out = []
    for s in page.samples:
        renamed = page.types.get(s.name) == "counter" and not s.name.endswith("_total")
        name = s.name + "_total" if renamed else s.name
        out.append((name, s.labels, canonical(s.value), s.timestamp))
    return out


def reference(text: str) -> list[tuple[object, ...]]:
    return [
        (s.name, s.labels, canonical(s.value), s.timestamp)
        for family in text_string_to_metric_families(text)
        for s in family.samples
    ]


def reference_docs(text: str) -> dict[str, str]:
    return {
        f.name: f.documentation for f in text_string_to_metric_families(text) if f.documentation
    }


@settings(max_examples=400, deadline=None)
@given(pages())
def test_same_samples_as_prometheus_client(text: str) -> None:
    assert as_prometheus_client_sees_it(text) == reference(text)


@settings(max_examples=200, deadline=None)
@given(pages())
def test_same_help_text_as_prometheus_client(text: str) -> None:
    page = parse(text)
    ours = {}
    for name, doc in page.help.items():
        family = (
            name[:-6] if page.types.get(name) == "counter" and name.endswith("_total") else name
        )
        if doc:
            ours[family] = doc
    assert ours == reference_docs(text)
