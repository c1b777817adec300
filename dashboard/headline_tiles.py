"""A page's headline numbers as one row of tiles in one small HTML block, drawn with the title.

Streamlit's frontend loads each element type's code on first use: a page's `st.metric` tiles
stayed grey skeletons until Chromium had also fetched and compiled the page's charts and tables,
about 0.3-0.4 s after the title on an idle machine and seconds at load 20 (bench/RESULTS.md,
"Dashboard first meaningful paint, wave 7"). One `st.html` block needs a 30 kB chunk and draws
the tiles with the title. A tile reads as `st.metric` did: label, value, a grey note under it;
`help` is the label's tooltip. Values never wrap inside a tile: the row wraps instead, so a long
value is never cut ("12.00 GP…").

Tests read the tiles back with `read`, as label -> value.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import streamlit as st

_CSS = (
    "<style>"
    ".fs-tiles{display:flex;flex-wrap:wrap;gap:0.5rem 1rem;margin:0 0 0.25rem 0}"
    ".fs-tile{flex:1 1 9rem;min-width:9rem}"
    ".fs-tile-label{font-size:0.875rem;opacity:0.8;line-height:1.6}"
    ".fs-tile-label abbr{text-decoration:underline dotted;cursor:help}"
    ".fs-tile-value{font-size:2.25rem;line-height:1.25;white-space:nowrap}"
    ".fs-tile-note{font-size:0.875rem;opacity:0.6;line-height:1.4}"
    "</style>"
)


@dataclass(frozen=True)
class Tile:
    label: str
    value: str
    note: str | None = None  # the grey line under the value (st.metric's delta, colour off)
    help: str | None = None  # tooltip of the label


def html_of(tiles: Sequence[Tile]) -> str:
    """The block's HTML: every text escaped."""
    cells = []
    for tile in tiles:
        label = html.escape(tile.label)
        if tile.help:
            label = f'<abbr title="{html.escape(tile.help)}">{label}</abbr>'
        note = f'<div class="fs-tile-note">{html.escape(tile.note)}</div>' if tile.note else ""
        cells.append(
            f'<div class="fs-tile"><div class="fs-tile-label">{label}</div>'
            f'<div class="fs-tile-value">{html.escape(tile.value)}</div>{note}</div>'
        )
    return f'{_CSS}<div class="fs-tiles">{"".join(cells)}</div>'


def show(tiles: Sequence[Tile], where: Any = None) -> None:
    """Draw `tiles` as one row in `where` (the page by default)."""
    if tiles:
        (where or st).html(html_of(tiles))


_TILE = re.compile(
    r'<div class="fs-tile-label">(?:<abbr title="[^"]*">)?(.*?)(?:</abbr>)?</div>'
    r'<div class="fs-tile-value">(.*?)</div>'
)


def read(block: str) -> dict[str, str]:
    """label -> value of the tiles in a block `html_of` wrote (for tests and tools)."""
    return {html.unescape(label): html.unescape(value) for label, value in _TILE.findall(block)}
