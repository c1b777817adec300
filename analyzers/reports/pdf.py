"""Print a report's HTML to PDF with headless Chromium (`--print-to-pdf`), no other dependency.

Debian's `chromium` is the renderer the dashboard's browser tests already use; the HTML is
self-contained, so printing needs no network. Raises SourceUnavailableError when Chromium is
missing or fails, so the HTML and Markdown are still delivered.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from fleetscope.errors import SourceUnavailableError

# Headless Chromium as root on a machine with no network: without the background-networking flags
# it keeps trying (and failing) to reach Google's hosts. The browser tests use the same set.
HEADLESS_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
)
FLAGS = (*HEADLESS_FLAGS, "--no-pdf-header-footer")


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def html_to_pdf(html_path: Path, pdf_path: Path, timeout_s: float = 120.0) -> Path:
    binary = chromium()
    if binary is None:
        raise SourceUnavailableError("chromium is not installed: cannot print the report to PDF")
    with tempfile.TemporaryDirectory(prefix="fleetscope-pdf-") as profile:
        command = [
            binary, *FLAGS, f"--user-data-dir={profile}",
            f"--print-to-pdf={pdf_path}", html_path.resolve().as_uri(),
        ]  # fmt: skip
        try:
            subprocess.run(command, capture_output=True, timeout=timeout_s, check=False)
        except subprocess.TimeoutExpired as exc:
            raise SourceUnavailableError(f"chromium took over {timeout_s:.0f} s to print") from exc
    if not pdf_path.exists() or pdf_path.read_bytes()[:5] != b"%PDF-":
        raise SourceUnavailableError(f"chromium did not print {html_path} to PDF")
    return pdf_path
