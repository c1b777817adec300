"""The trace page's Perfetto button follows Perfetto's documented postMessage deep link."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import pytest

from dashboard import perfetto


def test_the_button_carries_the_trace_and_the_ping_pong_handshake(tmp_path: Path) -> None:
    trace = tmp_path / "t.pt.trace.json.gz"
    trace.write_bytes(b"\x1f\x8b" + bytes(range(256)))
    html = perfetto.open_button_html(trace, "fleetscope job-1")
    assert html is not None
    (b64,) = re.findall(r'const B64 = "([^"]*)"', html)
    assert base64.b64decode(b64) == trace.read_bytes()
    assert "window.open(ORIGIN)" in html and 'const ORIGIN = "https://ui.perfetto.dev"' in html
    assert 'win.postMessage("PING", ORIGIN)' in html and 'evt.data !== "PONG"' in html
    assert "{perfetto: {buffer: bytes(), title: TITLE, url: window.location.href}}" in html


def test_a_trace_too_large_to_embed_gets_no_button(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trace = tmp_path / "big.json"
    trace.write_bytes(b"x" * 11)

    monkeypatch.setattr(perfetto, "MAX_BYTES", 10)
    assert perfetto.open_button_html(trace, "big") is None
