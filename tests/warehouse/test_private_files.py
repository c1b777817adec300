"""What a real `fleetscope server` process writes is private, whatever the umask (issue 28).

The DuckDB file and its WAL, `catalog.sqlite` (token hashes, jobs, users), segments and traces
were 0644 in 0755 folders under umask 022. The server now runs with umask 077 and tightens what
an earlier version left readable.
"""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

from bench.fuzz import Client, start_server
from fleetscope.contract import to_ipc
from simulator.maker.batches import gpu_batch
from simulator.wire import headers_for

TOKEN = "private-test-token-0123456789abcdef"


def modes(root: Path) -> dict[str, int]:
    found = {".": stat.S_IMODE(root.stat().st_mode)}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(folder) / name
            if not path.is_symlink():
                found[str(path.relative_to(root))] = stat.S_IMODE(path.lstat().st_mode)
    return found


def test_server_files_are_0600_in_0700_folders_under_umask_022(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir(mode=0o755)
    (data / "left-by-an-earlier-version.txt").write_text("job data\n")
    os.chmod(data / "left-by-an-earlier-version.txt", 0o644)
    previous = os.umask(0o022)
    try:
        process, url = start_server(data, TOKEN)
    finally:
        os.umask(previous)
    try:
        client = Client(url)
        body = to_ipc(gpu_batch("private"))
        status, _ = client.send("POST", "/v1/batches/gpu_samples", body, headers_for("p-1", TOKEN))
        assert status == 202
        client.close()
        deadline = time.monotonic() + 60
        while not (data / "catalog.sqlite").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        found = modes(data)
        assert "telemetry.duckdb" in found and "catalog.sqlite" in found
        folders = {p: m for p, m in found.items() if (data / p).is_dir()}
        files = {p: m for p, m in found.items() if p not in folders}
        assert set(folders.values()) == {0o700}, folders
        assert {p: m for p, m in files.items() if m & 0o077} == {}, files
    finally:
        process.terminate()
        process.wait(60)
