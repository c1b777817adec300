"""Issue 31, first paint: what a page open reads before its headline, and how it is drawn.

A page open on unchanged data re-opens no views: the connection and the newest sample are cached
under the data version (the segment manifest's identity), which moves with every publish.
Short read-only tables are plain HTML, not data grids; two charts read whole at a glance.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import altair as alt
import pandas as pd
import pytest

from dashboard import charts, drawn, energy_view, headline_tiles, source, tables
from tests.dashboard.conftest import Warehouse
from tests.dashboard.test_dashboard_pages import _app
from warehouse.storage.segments import SegmentStore


def test_the_data_version_moves_with_every_publish_and_only_then(tmp_path: Path) -> None:
    segments = tmp_path / "segments"
    assert source.manifest_version(segments) is None  # nothing published yet
    store = SegmentStore(segments)
    store.publish(1, {})
    first = source.manifest_version(segments)
    assert first is not None
    assert source.manifest_version(segments) == first  # unchanged data: the same version
    store.publish(2, {})
    assert source.manifest_version(segments) != first  # a publish swaps the manifest


def _constant(value: float) -> pd.DataFrame:
    buckets = pd.date_range("2026-11-29 04:00", periods=5, freq="min", tz="UTC")
    return pd.DataFrame({"bucket": buckets, "power_w": [value] * 5, "gpu": ["h/0"] * 5})


def _y_domain(frame: pd.DataFrame) -> object:
    spec = drawn.vega_spec(charts.metric_lines(frame, "power_w", "power (W)"))
    return spec["encoding"]["y"].get("scale", {}).get("domain")


def test_a_constant_series_gets_an_axis_with_readable_ticks() -> None:
    """Given a one-point domain, Vega-Lite labelled its tick "0.000000" (seen in headless
    Chromium); a unit of room gives "0.0, 0.2, ... 1.0"."""
    assert _y_domain(_constant(0.0)) == [0.0, 1.0]
    assert _y_domain(_constant(250.0)) == [249.0, 251.0]
    moving = _constant(0.0).assign(power_w=[0.0, 1.0, 2.0, 3.0, 4.0])
    assert _y_domain(moving) is None  # Vega-Lite's own scale for a series that moves


@pytest.mark.parametrize(("series", "height_px"), [(1, 240), (8, 240), (16, 366), (64, 555)])
def test_a_per_gpu_chart_is_as_tall_as_its_legend(series: int, height_px: int) -> None:
    """A 16-GPU job's legend was cut after its eleventh GPU at 240 px (the 1,000-GPU week's
    job page); a chart is now as tall as its legend's rows, and past 24 series the legend ends
    with Vega-Lite's "... N entries" instead of running off the chart."""
    buckets = pd.date_range("2026-11-29 04:00", periods=2, freq="min", tz="UTC")
    frame = pd.DataFrame(
        {
            "bucket": list(buckets) * series,
            "power_w": [200.0, 210.0] * series,
            "gpu": [f"gpu-node-{n // 8:03d}:{n % 8}" for n in range(series) for _ in buckets],
        }
    )
    spec = drawn.vega_spec(charts.metric_lines(frame, "power_w", "power (W)"))
    assert spec["height"] == height_px
    assert spec["encoding"]["color"]["legend"]["symbolLimit"] == charts.LEGEND_ROWS == 24


def test_the_measured_mfu_legend_shows_whole_gpu_model_names() -> None:
    measured = pd.DataFrame(
        {
            "job_id": ["a", "b"],
            "mfu_pct": [41.0, 12.5],
            "gpu_model": ["NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB"],
            "dtype": ["bf16", "bf16"],
            "team": ["nlp", None],
        }
    )
    chart = energy_view.measured_chart(measured)
    legend = chart.to_dict(validate=False)["encoding"]["color"]["legend"]
    assert legend["labelLimit"] == 0  # never "NVIDIA H100 80GB H…"
    assert legend["orient"] == "bottom"
    assert isinstance(chart, alt.Chart)


def _in_order(node: Any) -> list[str]:
    """The element types of a page's main area, in the order the browser receives them; a
    headline tile's Markdown is "tile"."""
    children = getattr(node, "children", None)
    if isinstance(children, dict):
        return [kind for _, child in sorted(children.items()) for kind in _in_order(child)]
    if node.type == "markdown" and headline_tiles.read([node.value]):
        return ["tile"]
    return [str(node.type)]


HEAVY = {"arrow_vega_lite_chart", "vega_lite_chart", "arrow_data_frame", "dataframe", "table"}
LAZY = HEAVY | {"html", "metric", "json"}  # code the browser loads on first use


@pytest.mark.parametrize(
    ("page", "query"),
    [
        (None, {}),
        ("views/job.py", {"job_id": "stall-1"}),
        ("views/jobs.py", {}),
        ("views/hosts.py", {}),
        ("views/gpus.py", {}),
        ("views/traces.py", {}),
        ("views/sharing.py", {}),
    ],
)
def test_every_page_draws_its_headline_tiles_as_markdown_in_one_row_before_anything_lazy(
    warehouse_env: Warehouse, page: str | None, query: dict[str, str]
) -> None:
    """Markdown is in the code every page loads first; a lazily loaded element (a chart, table,
    grid, `st.html`, `st.metric`) is revealed after the page's other lazy elements: tiles drawn
    first, in one row and as Markdown, show with the title (bench/RESULTS.md, "Dashboard first
    meaningful paint, wave 8")."""
    app = _app(page, **query)
    kinds = _in_order(app.main)
    assert kinds[0] == "title"
    tiles = [i for i, kind in enumerate(kinds) if kind == "tile"]
    assert tiles == list(range(tiles[0], tiles[-1] + 1)), kinds  # one row, nothing between
    assert not LAZY & set(kinds[: tiles[0]]), kinds
    assert not app.metric and not app.html  # no tile left as st.metric or an HTML block


def test_tiles_are_escaped_and_read_back() -> None:
    tiles = [
        headline_tiles.Tile("a <b> & c: *d*", "1 < 2 [x](y)", "note: 3 %", help='say "why"'),
        headline_tiles.Tile("plain", "8.00 GPU-h"),
        headline_tiles.Tile("- listed", "-1.5 GPU-h"),
    ]
    texts = [headline_tiles.markdown_of(tile) for tile in tiles]
    assert texts[0] == "a \\<b\\> & c\\: \\*d\\*\n### 1 \\< 2 \\[x\\]\\(y\\)\n\n:gray[note\\: 3 %]"
    assert headline_tiles.read([*texts, "**P1 · a finding**", "# a heading"]) == {
        "a <b> & c: *d*": "1 < 2 [x](y)",
        "plain": "8.00 GPU-h",
        "- listed": "-1.5 GPU-h",
    }


def test_a_small_number_never_reads_as_zero_and_the_heading_rounds_as_its_rows() -> None:
    assert tables.cell(0.03, "%.2f") == "0.03"  # the opportunities heading read "0.0" above it
    assert tables.cell(0.004, "%.2f") == "< 0.01"  # a demo's finding read "0.00 GPU-h"
    assert tables.cell(-0.004, "%.1f") == "> -0.1"
    assert tables.cell(0.0, "%.2f") == "0.00"
    assert tables.cell(3, "%d") == "3"
    assert tables.cell(None, "%.2f") == "-"


def test_a_sortable_column_takes_the_decimals_its_smallest_value_needs() -> None:
    """A grid's numbers stay numbers (sortable), so `cell`'s "< 0.1" cannot apply: a trace's
    second step, 0.049 ms, read "0.0" under "%.1f" beside the first's 9.3."""
    assert tables.fitted("%.1f", pd.Series([9.288, 0.04907])) == "%.2f"
    assert tables.fitted("%.2f", pd.Series([0.004, 12.0])) == "%.3f"
    assert tables.fitted("%.1f", pd.Series([0.0999, 0.0])) == "%.1f"  # reads 0.1, and 0 is 0
    assert tables.fitted("%.1f", pd.Series([1e-9])) == "%.4f"  # at most four decimals
    assert tables.fitted("%d", pd.Series([0.4])) == "%d"
