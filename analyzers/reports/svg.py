"""Inline SVG charts for self-contained reports: no JavaScript, no fonts or files to fetch.

Hand-written because the report must render the same in a mail client, a browser and Chromium's
PDF printer, and matplotlib is not a dependency. Values are escaped; sizes are in CSS pixels.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape

ALLOCATED = "#4c78a8"
ACTIVE = "#f58518"
WASTE = "#e45756"


def nice_ticks(peak: float, most: int = 6) -> list[float]:
    """Axis values from 0 past `peak` at a step of 1, 2, 2.5 or 5 x 10^k, at most `most` of them:
    every label distinct at the decimals its step needs (never "0, 1, 1, 2, 3" for a peak of 3)."""
    if not peak > 0:
        return [0.0, 1.0]
    raw = peak / (most - 1)
    power = 10.0 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    count = math.ceil(peak / step - 1e-9)
    return [round(step * i, 10) for i in range(count + 1)]


def _decimals(step: float) -> int:
    """Decimals that tell ticks `step` apart: 0 for 1, 1 for 0.5, 2 for 0.25."""
    for decimals in range(6):
        if abs(round(step, decimals) - step) < 1e-9:
            return decimals
    return 6


def grouped_bars(
    labels: Sequence[str],
    series: Sequence[tuple[str, str, Sequence[float]]],
    unit: str,
    width: int = 640,
    height: int = 220,
) -> str:
    """Bars per label, one per (name, color, values) series, with a legend and a value axis."""
    left, bottom, top = 56, 36, 24
    plot_w, plot_h = width - left - 10, height - bottom - top
    ticks = nice_ticks(max((v for _n, _c, values in series for v in values), default=0.0))
    peak = ticks[-1]  # bars scale to the top tick, so a bar reads against the axis it sits on
    decimals = _decimals(ticks[1] - ticks[0])
    slot = plot_w / max(len(labels), 1)
    bar_w = slot * 0.8 / max(len(series), 1)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" font-family="sans-serif" font-size="11">'
    ]
    for value in ticks:
        y = top + plot_h - plot_h * value / peak
        parts.append(
            f'<line x1="{left}" x2="{width - 10}" y1="{y:.1f}" y2="{y:.1f}" stroke="#ddd"/>'
            f'<text x="{left - 4}" y="{y + 4:.1f}" text-anchor="end">{value:,.{decimals}f}</text>'
        )
    parts.append(
        f'<text x="12" y="{top + plot_h / 2:.0f}" transform="rotate(-90 12 {top + plot_h / 2:.0f})" '
        f'text-anchor="middle">{escape(unit)}</text>'
    )
    for i, label in enumerate(labels):
        x0 = left + slot * i + slot * 0.1
        for j, (_name, color, values) in enumerate(series):
            h = min(plot_h, plot_h * values[i] / peak)  # a peak a float ulp over its tick
            parts.append(
                f'<rect x="{x0 + bar_w * j:.1f}" y="{top + plot_h - h:.1f}" width="{bar_w:.1f}" '
                f'height="{h:.1f}" fill="{color}"><title>{escape(label)}: '
                f"{values[i]:,.1f}</title></rect>"
            )
        parts.append(
            f'<text x="{left + slot * (i + 0.5):.1f}" y="{height - bottom + 16}" '
            f'text-anchor="middle">{escape(label)}</text>'
        )
    for j, (name, color, _values) in enumerate(series):
        x = left + 130 * j
        parts.append(
            f'<rect x="{x}" y="4" width="10" height="10" fill="{color}"/>'
            f'<text x="{x + 14}" y="13">{escape(name)}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)
