"""Installed entry points without scanning every distribution on every run: a file cache keyed on
the state of the import path.

Why: `importlib.metadata.entry_points()` imports email, zipfile and csv and reads the metadata of
every installed distribution (about 150 here): ~40 ms of each `fleetscope trace analyze`, a
command that takes ~0.1 s on a small trace (issue 19). The answer only changes when a
distribution is installed, removed or rewritten, which changes the mtime of a folder on
`sys.path` (a `*.dist-info` added or removed) or of an `entry_points.txt` (rewritten in place).
So the key is the interpreter, `sys.path` in order, each entry's mtime and the mtime of each
`entry_points.txt` of the metadata folders in it (the folders `importlib.metadata` reads:
`*.dist-info`, `*.egg-info`, `*.egg`); stat-ing those is ~1 ms. The same approach as stevedore's
`_cache.py`, except that the full key is stored in the file and compared on read (the file name
is only a short digest of the interpreter and path), so a stale or colliding file is a miss, never
a wrong answer. On a miss the real `importlib.metadata.entry_points()` answers and the file is
rewritten (atomically; a cache folder that cannot be written just means no cache).

`EntryPoint` here is importlib.metadata's minus the distribution: `name`, `value`, `group`,
`load()` with the same syntax and semantics, without importing importlib.metadata.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
import zlib
from functools import reduce
from importlib import import_module
from pathlib import Path
from typing import Any, NamedTuple

__all__ = ["EntryPoint", "cache_dir", "entry_points"]

# importlib.metadata.EntryPoint.pattern
_PATTERN = re.compile(r"(?P<module>[\w.]+)\s*(:\s*(?P<attr>[\w.]+)\s*)?((?P<extras>\[.*\])\s*)?$")
_METADATA_SUFFIXES = (".dist-info", ".egg-info", ".egg")
_FORMAT = 1
# A file unused this long is removed when another is written (each interpreter and path, e.g. a
# test's temporary site folder, has its own file).
_STALE_S = 7 * 24 * 3600


class EntryPoint(NamedTuple):
    """An installed entry point: `value` is `module[:attr.attr] [extras]`."""

    name: str
    value: str
    group: str

    def load(self) -> Any:
        """The module, or the object the value names in it (importlib.metadata's rules)."""
        match = _PATTERN.match(self.value)
        if match is None:
            raise ValueError(f"entry point {self.name!r} = {self.value!r} is not module[:attr]")
        module = import_module(match.group("module"))
        attrs = filter(None, (match.group("attr") or "").split("."))
        return reduce(getattr, attrs, module)


def cache_dir() -> Path:
    """`$XDG_CACHE_HOME/fleetscope` (default ~/.cache/fleetscope)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "fleetscope"


def _stamp(path: str) -> list[int]:
    """mtime, size and inode: a file rewritten within one tick of the coarse file clock (a few
    ms) keeps its mtime but rarely its size, and a replaced one gets a new inode."""
    try:
        st = os.stat(path)
    except OSError:
        return [-1]
    return [st.st_mtime_ns, st.st_size, st.st_ino]


def _path_state() -> list[Any]:
    """What `entry_points()` reads, as stamps: the interpreter, each path entry and each
    metadata folder's `entry_points.txt` ([-1]: absent)."""
    state: list[Any] = [sys.executable, sys.prefix]
    for entry in sys.path:
        where = os.path.abspath(entry or ".")
        state.append([where, *_stamp(where)])
        try:
            children = sorted(os.listdir(where))
        except OSError:  # a zip, a file or a missing folder: its own mtime covers it
            continue
        for child in children:
            if child.lower().endswith(_METADATA_SUFFIXES):
                folder = os.path.join(where, child)
                state.append([child, *_stamp(os.path.join(folder, "entry_points.txt"))])
                if child.lower().endswith(".egg"):
                    egg_info = os.path.join(folder, "EGG-INFO", "entry_points.txt")
                    state.append([child + "/EGG-INFO", *_stamp(egg_info)])
    return state


def _scan() -> dict[str, list[list[str]]]:
    """Every group's entry points in importlib.metadata's order (a distribution installed
    twice on the path counts once, the first)."""
    from importlib.metadata import entry_points as installed

    every = installed()
    return {
        group: [[ep.name, ep.value] for ep in every.select(group=group)]
        for group in sorted(every.groups)
    }


def _read(path: Path, state: list[Any]) -> dict[str, list[list[str]]] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("format") != _FORMAT:
        return None
    if data.get("state") != state:
        return None
    groups = data.get("groups")
    return groups if isinstance(groups, dict) else None


def _write(path: Path, state: list[Any], groups: dict[str, list[list[str]]]) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        _prune(path.parent)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"format": _FORMAT, "state": state, "groups": groups}))
        os.replace(tmp, path)
    except OSError:
        pass


def _prune(folder: Path) -> None:
    """Remove the cache files neither written nor read (atime, as far as the file system keeps
    it) for `_STALE_S`; run only on a miss, which is rare."""
    now = time.time()
    for old in folder.glob("entry-points-*.json"):
        try:
            if now - max(old.stat().st_atime, old.stat().st_mtime) > _STALE_S:
                old.unlink()
        except OSError:
            pass


# The default cache's answer per `sys.path`, for the rest of the process (as fleetscope.plugins
# reads entry points: once per process), so that a second group costs no second stat walk.
_PROCESS: dict[tuple[str, ...], dict[str, list[list[str]]]] = {}


def entry_points(group: str, cache: Path | None = None) -> list[EntryPoint]:
    """The installed entry points of `group`, in importlib.metadata's order; read from the cache
    file in `cache` (default `cache_dir()`, then kept for the process) when the path has not
    changed since it was written."""
    key = tuple(sys.path)
    groups = _PROCESS.get(key) if cache is None else None
    if groups is None:
        groups = _groups(cache or cache_dir())
        if cache is None:
            _PROCESS[key] = groups
    return [EntryPoint(name, value, group) for name, value in groups.get(group, [])]


def _groups(cache: Path) -> dict[str, list[list[str]]]:
    state = _path_state()
    # The file name only spreads interpreters and paths over files; the full state is checked.
    digest = zlib.crc32(json.dumps([*state[:2], list(sys.path)]).encode())
    path = cache / f"entry-points-{digest:08x}.json"
    groups = _read(path, state)
    if groups is None:
        groups = _scan()
        _write(path, state, groups)
    return groups
