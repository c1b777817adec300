"""Charts on a page: a `dashboard.charts` builder's Vega-Lite spec, made once per input and drawn.

`st.altair_chart` builds and converts the Altair object on every run and validates it against the
Vega-Lite JSON schema, the largest item of the fleet page's Python in a profile (five charts). Here
the spec is built without that validation (the builders are fixed code, checked by the tests that
draw them) and cached per builder and input frame, so a page drawn
again from cached frames converts nothing: the fleet page's rerun went from 0.37 to 0.27 CPU
seconds (bench/RESULTS.md, "Dashboard pages, before and after"). The frames travel as named
datasets, as `st.altair_chart` sends them.

No queries here, and no chart design: that is `dashboard.charts`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import altair as alt
import pandas as pd
import streamlit as st

from dashboard import charts
from fleetscope.settings import load_settings

_TTL_S = load_settings().dashboard.cache_ttl_s
_CHILDREN = ("layer", "hconcat", "vconcat", "concat")


def vega_spec(chart: Any) -> dict[str, Any]:
    """The Vega-Lite spec of an Altair chart, every DataFrame in it moved to `datasets` under a
    name (one entry per frame however many layers share it), not validated."""
    datasets: dict[str, pd.DataFrame] = {}
    names: dict[int, str] = {}

    def name_data(node: Any) -> None:
        data = getattr(node, "data", alt.Undefined)
        if isinstance(data, pd.DataFrame):
            name = names.setdefault(id(data), f"frame_{len(names)}")
            datasets[name] = data
            node.data = alt.NamedData(name=name)
        for attr in _CHILDREN:
            children = getattr(node, attr, alt.Undefined)
            if isinstance(children, list):
                for child in children:
                    name_data(child)

    name_data(chart)
    spec: dict[str, Any] = chart.to_dict(validate=False)
    spec["datasets"] = datasets
    return spec


# Keyed by the builder and the frames' contents, so a spec can never be stale: kept 10 min (not
# `dashboard.cache_ttl_s`, after which every page open converted its charts again).
@st.cache_data(ttl=max(_TTL_S, 600.0), show_spinner=False, max_entries=64)
def _spec(builder: str, args: tuple[Any, ...]) -> dict[str, Any]:
    build: Callable[..., Any] = getattr(charts, builder)
    return vega_spec(build(*args))


def chart(builder: Callable[..., Any], *args: Any, where: Any = None) -> None:
    """Draw `builder(*args)` (a function of `dashboard.charts`) full width in `where` (a column,
    the sidebar; the page by default)."""
    (where or st).vega_lite_chart(_spec(builder.__name__, args), width="stretch")
