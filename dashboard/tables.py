"""Tables a person reads: friendly column names with units, rounding, "-" for missing, and no
column a reader did not ask for. Every page's `st.dataframe` goes through `show`.

A column is described once (`Col`: header, format, width); a numeric column with a missing value is
rendered as text ("-" where missing, the format elsewhere), because Streamlit prints "None" in an
empty numeric cell. Pages pass only the columns they need, so the table fits the page's width.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import pandas as pd
import streamlit as st

Width = Literal["small", "medium", "large"]


@dataclass(frozen=True)
class Col:
    header: str
    format: str = ""  # printf-style for numbers, e.g. "%.1f"; empty: as is
    width: Width | None = None


def _text(value: Any, fmt: str) -> str:
    if value is None or (isinstance(value, float) and pd.isna(value)) or value is pd.NA:
        return "-"
    if fmt and isinstance(value, int | float):
        return fmt % value
    return str(value)


def present(frame: pd.DataFrame, columns: Mapping[str, Col]) -> pd.DataFrame:
    """Only `columns`, in their order; missing text and missing numbers become "-"."""
    shown = frame[[c for c in columns if c in frame.columns]].copy()
    for name, col in columns.items():
        if name not in shown.columns:
            continue
        series = shown[name]
        if pd.api.types.is_numeric_dtype(series) and not series.isna().any():
            continue
        shown[name] = [_text(v, col.format) for v in series]
    return shown


def show(frame: pd.DataFrame, columns: Mapping[str, Col], **kwargs: Any) -> Any:
    """`st.dataframe` of `present(frame, columns)` with the headers and formats of `columns`."""
    shown = present(frame, columns)
    config: dict[str, Any] = {}
    for name, col in columns.items():
        if name not in shown.columns:
            continue
        if pd.api.types.is_numeric_dtype(shown[name]) and col.format:
            config[name] = st.column_config.NumberColumn(
                col.header, format=col.format, width=col.width
            )
        else:
            config[name] = st.column_config.TextColumn(col.header, width=col.width)
    return st.dataframe(shown, hide_index=True, width="stretch", column_config=config, **kwargs)
