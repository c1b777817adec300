"""The one-pass scanner gives exactly what the full parser plus normalize.py give, scrape after
scrape: on the shared dcgm-exporter pages, on simulator pages of every host kind, and on
generated pages whose lines repeat with new values (the cached path) mixed with timestamps, blank
sentinels, escapes, odd numbers and broken lines (which must fail the same way, naming the line).
"""

from __future__ import annotations

import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collector.dcgm_scan import DcgmScanner
from fleetscope.errors import MetricsParseError
from fleetscope.exposition import ExpositionParser
from fleetscope.normalize import GpuReading, normalize_samples
from simulator.fleet import FleetSpec
from simulator.sim import FleetSimulator
from tests.collector.conftest import VARIANTS, dcgm_text

T0 = 1_760_000_000


def exact(readings: list[GpuReading]) -> str:
    """Rows, labels and extras with every float's exact repr (so -0.0 != 0.0) and key order."""
    return repr([(r.row, r.labels, r.extra) for r in readings])


def reference(text: str, ts_ms: int = 5, host: str | None = None) -> str:
    samples = ExpositionParser().parse(text).samples
    return exact(normalize_samples(samples, ts_ms=ts_ms, cluster="c", host=host))


def scanned(scanner: DcgmScanner, text: str, ts_ms: int = 5, host: str | None = None) -> str:
    return exact(scanner.scan(text, ts_ms=ts_ms, cluster="c", host=host))


@pytest.mark.parametrize("variant", VARIANTS)
def test_shared_pages_scan_exactly_like_parse_and_normalize(variant: str) -> None:
    text = dcgm_text(variant)
    scanner = DcgmScanner()
    assert scanned(scanner, text) == reference(text)
    assert scanned(scanner, text, ts_ms=6, host="node-a") == reference(text, 6, "node-a")


def test_simulator_pages_of_every_host_kind_over_consecutive_seconds() -> None:
    sim = FleetSimulator(FleetSpec(hosts=6, seed=3), origin_s=T0, horizon_s=3600)
    for host in sim.hosts:
        scanner = DcgmScanner()
        for t in range(T0 + 600, T0 + 606):
            text = sim.page(host, t)
            assert scanned(scanner, text, t * 1000) == reference(text, t * 1000)


def test_a_broken_value_on_a_known_line_names_that_line() -> None:
    text = dcgm_text("h100_slurm_main")
    scanner = DcgmScanner()
    scanner.scan(text, ts_ms=0, cluster="c")
    lines = text.split("\n")
    victim = next(i for i, line in enumerate(lines) if line.startswith("DCGM_FI_DEV_FB_USED"))
    lines[victim] = lines[victim].rsplit(" ", 1)[0] + " 12_5"
    with pytest.raises(MetricsParseError) as info:
        scanner.scan("\n".join(lines), ts_ms=0, cluster="c")
    assert info.value.line_no == victim + 1


@pytest.mark.parametrize(
    "value", ["NaN", "-0", "-0.0", "+5", "1e3", "9223372036854775794", "140737488355328", "7"]
)
def test_a_page_of_known_shape_with_one_unusual_value(value: str) -> None:
    """The shape shortcut reads only plain numbers; any other value sends the page line by
    line, and either way the readings are the reference's."""
    text = dcgm_text("h100_k8s_release")
    scanner = DcgmScanner()
    scanner.scan(text, ts_ms=0, cluster="c")
    assert scanner._shape is not None  # the next page of this shape skips line parsing
    lines = text.split("\n")
    victim = next(i for i, line in enumerate(lines) if line.startswith("DCGM_FI_DEV_POWER_USAGE"))
    lines[victim] = lines[victim].rsplit(" ", 1)[0] + " " + value
    changed = "\n".join(lines)
    assert scanned(scanner, changed) == reference(changed)
    assert scanned(scanner, text) == reference(text)


def test_the_cache_is_bounded() -> None:
    scanner = DcgmScanner(cache_limit=16)
    for gpu in range(100):
        scanner.scan(f'DCGM_FI_DEV_GPU_UTIL{{gpu="{gpu}"}} 1\n', ts_ms=0, cluster="c")
    assert len(scanner._series) <= 16


# Generated pages: a fixed set of series (the prefixes), then several "scrapes" of new values.
FIELD_NAMES = [
    "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_PROF_SM_ACTIVE",
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_NEW_FIELD",
    "DCGM_FI_DEV_COUNT", "node_cpu_seconds_total",
]  # fmt: skip
label_values = st.text(alphabet=string.ascii_letters + string.digits + '-"\\ {},=é', max_size=8)


def escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


@st.composite
def series(draw: st.DrawFn) -> str:
    labels: list[tuple[str, str]] = []
    gpu = draw(st.one_of(st.integers(0, 3).map(str), st.sampled_from(["x", "", None])))
    if gpu is not None:
        labels.append(("gpu", gpu))
    if draw(st.booleans()):
        labels.append(("GPU_I_ID", draw(st.integers(1, 3).map(str))))
    for name in draw(
        st.lists(st.sampled_from(["UUID", "Hostname", "pod", "hpc_job"]), unique=True)
    ):
        labels.append((name, escape(draw(label_values))))
    sep = draw(st.sampled_from([",", ", "]))
    body = sep.join(f'{k}="{v}"' for k, v in labels)
    return f"{draw(st.sampled_from(FIELD_NAMES))}{{{body}}}"


values = st.one_of(
    st.integers(-(10**20), 10**20).map(str),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.floats(min_value=0, max_value=1e6).map(lambda f: f"{f:f}"),
    st.sampled_from(
        ["NaN", "+Inf", "-Inf", "-0", "0.0", "9223372036854775794", "140737488355329",
         "140737488355328.0", "1e3", "  7", "7\r", "12_5", "abc", "1 2 3", ""]
    ),
)  # fmt: skip


@st.composite
def scrapes(draw: st.DrawFn) -> list[str]:
    """Pages of one exporter: the same series (and extra lines) each time, new values."""
    prefixes = draw(st.lists(series(), min_size=1, max_size=8))
    stamped = [draw(st.integers(0, 5)) == 0 for _ in prefixes]
    after = [
        draw(st.sampled_from([None] * 6 + ["", "   ", "# plain comment", "#"])) for _ in prefixes
    ]
    pages = []
    for _ in range(4):
        lines = ["# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).", "# TYPE x gauge"]
        for prefix, ts, extra in zip(prefixes, stamped, after, strict=True):
            stamp = f" {draw(st.integers(0, 2**40))}" if ts else ""
            lines.append(f"{prefix} {draw(values)}{stamp}")
            if extra is not None:
                lines.append(extra)
        pages.append("\n".join(lines) + "\n")
    return pages


def outcome(fn: object, text: str) -> str:
    try:
        return fn(text)  # type: ignore[operator, no-any-return]
    except MetricsParseError as exc:
        return f"MetricsParseError at line {exc.line_no}"


@settings(max_examples=300, deadline=None)
@given(scrapes())
def test_scrape_after_scrape_the_scanner_equals_parse_and_normalize(pages: list[str]) -> None:
    scanner = DcgmScanner()
    for text in pages:
        assert outcome(lambda t: scanned(scanner, t), text) == outcome(reference, text)
