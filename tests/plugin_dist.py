"""A test's own plug-ins, installed for real for the length of a block: a distribution's metadata
folder (`entry_points.txt`) on `sys.path`, read by fleetscope.plugins like any installed package,
since `server.plugins` takes entry-point names only."""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from fleetscope import plugins


@contextmanager
def installed(folder: Path, groups: Mapping[str, Mapping[str, str]]) -> Iterator[None]:
    """`groups` (group -> name -> `module:attr`) installed as the distribution
    `fleetscope_test_plugins` under `folder` while the block runs."""
    meta = folder / "fleetscope_test_plugins-0.dist-info"
    meta.mkdir(parents=True, exist_ok=True)
    (meta / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: fleetscope-test-plugins\nVersion: 0\n"
    )
    lines = []
    for group, entries in groups.items():
        lines.append(f"[{group}]")
        lines.extend(f"{name} = {value}" for name, value in entries.items())
    (meta / "entry_points.txt").write_text("\n".join(lines) + "\n")
    sys.path.insert(0, str(folder))
    plugins._registered.cache_clear()
    try:
        yield
    finally:
        sys.path.remove(str(folder))
        plugins._registered.cache_clear()


# The server plug-ins under tests/fleet/, each by its module's name (tests name them so).
TEST_SERVER_PLUGINS = {
    "tests.fleet.stalled_analysis": "tests.fleet.stalled_analysis:setup",
    "tests.fleet.counted_analysis": "tests.fleet.counted_analysis:setup",
}
