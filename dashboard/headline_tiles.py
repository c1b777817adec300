"""A page's headline numbers as one row of tiles of plain Markdown, drawn with the title.

Streamlit's frontend loads each element type's code on first use (`React.lazy`), and a lazily
loaded element is revealed only once the browser has fetched, compiled and laid out the page's
other lazily loaded elements (its charts, tables and grids: megabytes of code). Tiles as
`st.metric` (wave 6) or as one `st.html` block (wave 7) waited for them: 0.2-1.4 s after the title
on the fleet page (bench/RESULTS.md, "Dashboard first meaningful paint, wave 8"). Markdown is
part of the code every page loads first, as the title is, so Markdown tiles are drawn in the same
frame as the title. A tile reads as `st.metric` did: label, value (a third-level heading without
its anchor link), a grey note under it; `help` is the tile's tooltip. The tiles sit in one
horizontal container that wraps onto a second row rather than cut a value ("12.00 GP…").

Tests and tools read the tiles back with `read`, as label -> value.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import streamlit as st

TILE_PX = 160  # a tile's width: "12.0k GPU-h" at a heading's size fits


@dataclass(frozen=True)
class Tile:
    label: str
    value: str
    note: str | None = None  # the grey line under the value (st.metric's delta, colour off)
    help: str | None = None  # the tile's tooltip


_SPECIAL = re.compile(r"([\\`*_{}\[\]<>()#+!|~:$]|\A-)")


def escaped(text: object) -> str:
    """`text` as literal Markdown: its Markdown (and Streamlit's `:colour[...]`, `$` math)
    characters escaped, and a leading "-" (a list item otherwise), one line (the fleet page's
    findings use it too)."""
    return _SPECIAL.sub(r"\\\1", str(text)).replace("\n", " ")


def markdown_of(tile: Tile) -> str:
    """One tile's Markdown: the label, the value as a heading, the note in grey."""
    note = f"\n\n:gray[{escaped(tile.note)}]" if tile.note else ""
    return f"{escaped(tile.label)}\n### {escaped(tile.value)}{note}"


def show(tiles: Sequence[Tile], where: Any = None, key: str = "fs_tiles") -> None:
    """Draw `tiles` as one row in `where` (the page by default); `key` names the row (its
    element carries the class `st-key-<key>`), one per row on a page."""
    if not tiles:
        return
    row = (where or st).container(horizontal=True, gap="medium", key=key)
    for tile in tiles:
        row.markdown(markdown_of(tile), help=tile.help, anchors=False, width=TILE_PX)


_TILE = re.compile(r"\A(.*)\n### (.*?)(?:\n\n:gray\[.*\])?\Z", re.DOTALL)
_UNESCAPE = re.compile(r"\\(.)")


def read(markdowns: Iterable[str]) -> dict[str, str]:
    """label -> value of the tiles among a page's Markdown texts (for tests and tools); other
    Markdown is skipped."""
    found = {}
    for text in markdowns:
        match = _TILE.match(text)
        if match and "\n" not in match.group(1):
            found[_UNESCAPE.sub(r"\1", match.group(1))] = _UNESCAPE.sub(r"\1", match.group(2))
    return found
