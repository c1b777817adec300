"""Tables a person reads: friendly column names with units, rounding, "-" for missing, and no
column a reader did not ask for. Every page's `st.dataframe` goes through `show`; a short table
only read (a few rows, nothing to click, page or sort) goes through `static`, plain HTML.

A column is described once (`Col`: header, format, width); a numeric column with a missing value is
rendered as text ("-" where missing, the format elsewhere), because Streamlit prints "None" in an
empty numeric cell. Pages pass only the columns they need, so the table fits the page's width.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

import pandas as pd
import streamlit as st

Width = Literal["small", "medium", "large"] | int  # Streamlit's sizes, or pixels
TEXT_MAX_PX = 480  # a row's id wider than this is cut (hover shows it whole)
CELL_PADDING_PX = 24
_GLYPH_PX = {**dict.fromkeys("iljtfr.,:;-/|!'()[] ", 4.4), **dict.fromkeys("mwMW", 11.2)}


@dataclass(frozen=True)
class Col:
    header: str
    format: str = ""  # printf-style for numbers, e.g. "%.1f"; empty: as is
    width: Width | None = None


def cell(value: Any, fmt: str) -> str:
    """A cell's text; a non-zero number the format would round to zero reads "< 0.01" (a demo's
    0.004 GPU-h finding), never "0.00"."""
    if value is None or (isinstance(value, float) and pd.isna(value)) or value is pd.NA:
        return "-"
    if fmt and isinstance(value, int | float):
        text = fmt % value
        if value and text.strip("-0.") == "":  # "0.00", "-0.0": a non-zero value rounded away
            unit = fmt % 10 ** -_decimals(fmt)
            return f"< {unit}" if value > 0 else f"> -{unit}"
        return text
    return str(value)


MAX_DECIMALS = 4  # `fitted`: beyond this a value reads 0.0000 (a column of 1e-5 ms is rare)


def fitted(fmt: str, values: pd.Series) -> str:
    """`fmt` with enough decimals (up to MAX_DECIMALS) that no non-zero value of a sortable
    numeric column reads 0: a trace's 0.049 ms second step read "0.0" under "%.1f"."""
    nonzero = values[values != 0].abs()
    decimals = _decimals(fmt)
    if not fmt.endswith("f") or nonzero.empty or nonzero.min() >= 0.5 * 10**-decimals:
        return fmt
    needed = min(MAX_DECIMALS, math.ceil(-math.log10(nonzero.min())))
    return fmt.replace(f".{decimals}f", f".{max(decimals, needed)}f")


def _decimals(fmt: str) -> int:
    """Decimals of a printf number format ("%.2f": 2; "%d": 0)."""
    _, dot, rest = fmt.partition(".")
    digits = rest.rstrip("fegEG%")
    return int(digits) if dot and digits.isdigit() else 0


def present(frame: pd.DataFrame, columns: Mapping[str, Col]) -> pd.DataFrame:
    """Only `columns`, in their order; missing text and missing numbers become "-"."""
    shown = frame[[c for c in columns if c in frame.columns]].copy()
    for name, col in columns.items():
        if name not in shown.columns:
            continue
        series = shown[name]
        if pd.api.types.is_numeric_dtype(series) and not series.isna().any():
            continue
        shown[name] = [cell(v, col.format) for v in series]
    return shown


ROW_PX = 35  # Streamlit's data grid: one row, and the header row, are 35 px
PAGE_ROWS = 25  # rows per page of a listing: a page is read whole, never scrolled inside


def fit_height(rows: int) -> int:
    """Pixels for a grid showing `rows` rows and its header without an inner scroll bar."""
    return ROW_PX * (max(rows, 1) + 1) + 3


def page_of(frame: pd.DataFrame, key: str, page_rows: int = PAGE_ROWS) -> pd.DataFrame:
    """The rows of the page picked under the table (`key` names the picker): the whole frame when
    it fits one page, else `page_rows` rows and a caption "rows 26-50 of 109"."""
    if len(frame) <= page_rows:
        return frame
    pages = -(-len(frame) // page_rows)
    number = int(
        st.number_input(
            f"page (of {pages})", min_value=1, max_value=pages, value=1, step=1, key=key
        )
    )
    first = (number - 1) * page_rows
    st.caption(f"rows {first + 1}-{min(first + page_rows, len(frame))} of {len(frame)}")
    return frame.iloc[first : first + page_rows]


def listing(
    frame: pd.DataFrame,
    columns: Mapping[str, Col],
    *,
    key: str,
    page: str,
    param: str,
    page_rows: int = PAGE_ROWS,
) -> None:
    """A table whose rows open `page` with `?param=<the row's param column>` when clicked: as
    tall as its rows (no inner scrolling), paged past `page_rows`, sortable by its headers."""
    shown = page_of(frame, f"{key}_page", page_rows)
    if param in columns and columns[param].width is None and len(shown):
        columns = {**columns, param: replace(columns[param], width=text_px(shown[param]))}
    event = show(
        shown,
        columns,
        on_select="rerun",
        selection_mode="single-row",
        key=key,
        height=fit_height(len(shown)),
    )
    rows = event.selection.rows if event is not None else []
    if rows:
        st.switch_page(page, query_params={param: str(shown.iloc[rows[0]][param])})


def text_px(values: pd.Series) -> int:
    """Pixels that show the longest of `values` whole. The grid sizes a column from the first
    rows it measures: on the week's Jobs page the 11th row's id ("...llama3-70b-distill-memv")
    was cut. Glyph widths of the grid's font, fitted to eleven of the week's ids in Chromium at
    1,440 px (within 4 px each), plus the cell's padding; wider than needed, the column pushes
    the others out of the page (the demo's Jobs table scrolled sideways at 7.6 px a character)."""
    longest = max(
        sum(_GLYPH_PX.get(c, 8.6 if c.isupper() else 6.9) for c in str(v)) for v in values
    )
    return int(min(TEXT_MAX_PX, CELL_PADDING_PX + longest + 0.999))


def show(frame: pd.DataFrame, columns: Mapping[str, Col], **kwargs: Any) -> Any:
    """`st.dataframe` of `present(frame, columns)` with the headers and formats of `columns`,
    as tall as its rows up to PAGE_ROWS (a short table never shows an empty grid below it)."""
    kwargs.setdefault("height", fit_height(min(len(frame), PAGE_ROWS)))
    shown = present(frame, columns)
    config: dict[str, Any] = {}
    for name, col in columns.items():
        if name not in shown.columns:
            continue
        if pd.api.types.is_numeric_dtype(shown[name]) and col.format:
            config[name] = st.column_config.NumberColumn(
                col.header, format=fitted(col.format, shown[name]), width=col.width
            )
        else:
            config[name] = st.column_config.TextColumn(col.header, width=col.width)
    return st.dataframe(shown, hide_index=True, width="stretch", column_config=config, **kwargs)


def static(frame: pd.DataFrame, columns: Mapping[str, Col]) -> None:
    """A short, read-only table (`st.table`: plain HTML) with the headers and formats of
    `columns`. Each `st.dataframe` is a canvas data grid whose code and layout the browser must
    load before the page settles: three small grids on the fleet page kept its headline tiles
    blank for seconds on a loaded machine (bench/RESULTS.md, "Dashboard first meaningful paint,
    wave 6"). For tables a reader clicks, pages or sorts: `listing` / `show`."""
    shown = present(frame, columns)
    formats: dict[Any, str | Callable[[object], str] | None] = {
        columns[name].header: _cell(columns[name].format)
        for name in shown.columns
        if columns[name].format
    }
    headed = shown.rename(columns={name: columns[name].header for name in shown.columns})
    st.table(headed.style.format(formats).hide(axis="index"))


def _cell(fmt: str) -> Callable[[object], str]:
    """A cell's text: numbers with `fmt`, the rest (already "-" where missing) as they are."""

    def text(value: object) -> str:
        return cell(value, fmt) if isinstance(value, int | float) else str(value)

    return text
