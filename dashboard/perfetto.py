"""The trace page's "Open in Perfetto UI": Perfetto's documented postMessage deep link.

Perfetto UI cannot fetch a trace from a loopback dashboard (its `?url=` needs public HTTPS with
CORS), so the page does what perfetto.dev/docs/visualization/deep-linking-to-perfetto-ui
describes for dashboards: open https://ui.perfetto.dev with `window.open`, post the string 'PING'
to it until it answers 'PONG' (its message listener is ready), then post
`{perfetto: {buffer, title, url}}` with the trace's bytes as an ArrayBuffer. The UI accepts
messages from its opener, and treats 127.0.0.1 and localhost origins as trusted (no consent prompt).
The bytes travel inside the button's HTML (base64), so a trace larger than `MAX_BYTES` gets only the
download button. Perfetto reads gzip-compressed JSON traces as they are.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

ORIGIN = "https://ui.perfetto.dev"
MAX_BYTES = 25 * 1024 * 1024

# Drawn as Streamlit draws its own buttons (font, height, border), flush with the frame's top, so it
# sits level with the "Download trace" button beside it.
_TEMPLATE = """
<style>body { margin: 0; }</style>
<button id="open" style="font: 400 14px 'Source Sans Pro', 'Source Sans 3', sans-serif;
  color: rgb(49, 51, 63); min-height: 38px; padding: 0 12px; border-radius: 8px;
  border: 1px solid rgba(49, 51, 63, 0.2); background: white; cursor: pointer;"
  >Open in Perfetto UI</button>
<span id="state" style="font: 12px sans-serif; color: #666; margin-left: 8px;"></span>
<script>
const ORIGIN = __ORIGIN__;
const TITLE = __TITLE__;
const B64 = "__B64__";
function bytes() {
  const raw = atob(B64);
  const out = new Uint8Array(raw.length);
  for (let i = 0; i < raw.length; i++) out[i] = raw.charCodeAt(i);
  return out.buffer;
}
document.getElementById("open").onclick = () => {
  const state = document.getElementById("state");
  const win = window.open(ORIGIN);
  if (!win) { state.textContent = "the browser blocked the new tab: allow pop-ups"; return; }
  state.textContent = "waiting for Perfetto UI...";
  const timer = setInterval(() => win.postMessage("PING", ORIGIN), 50);
  const onMessage = (evt) => {
    if (evt.data !== "PONG") return;
    clearInterval(timer);
    window.removeEventListener("message", onMessage);
    win.postMessage({perfetto: {buffer: bytes(), title: TITLE, url: window.location.href}},
                    ORIGIN);
    state.textContent = "sent to Perfetto UI";
  };
  window.addEventListener("message", onMessage);
};
</script>
"""


def open_button_html(path: Path, title: str) -> str | None:
    """The button's HTML with the trace inside, or None when the trace is too large to embed."""
    data = path.read_bytes()
    if len(data) > MAX_BYTES:
        return None
    return (
        _TEMPLATE.replace("__ORIGIN__", json.dumps(ORIGIN))
        .replace("__TITLE__", json.dumps(title))
        .replace("__B64__", base64.b64encode(data).decode())
    )
