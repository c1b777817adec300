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

Every command reads this file, so reading it imports nothing that the command line has not
imported already (issue 19): the file is `marshal` data (built in; the json module cost ~1.7 ms a
run to import), paths are `os.path` strings (pathlib and the urllib.parse it imports, ~5 ms).
marshal trusts its input as far as `__pycache__` does, which lives under the same user's control;
anything it cannot read back as the expected lists is a miss.

`EntryPoint` here is importlib.metadata's minus the distribution: `name`, `value`, `group`,
`load()` with the same syntax and semantics, without importing importlib.metadata.
"""

from __future__ import annotations

import marshal
import os
import re
import sys
import time
from functools import reduce
from importlib import import_module
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["EntryPoint", "cache_dir", "entry_points"]

# importlib.metadata.EntryPoint.pattern, compiled on first use: a plain `module[:attr]` value (every
# one fleetscope installs) is split without it (its compile was ~0.3 ms of every command).
_PATTERN = r"(?P<module>[\w.]+)\s*(:\s*(?P<attr>[\w.]+)\s*)?((?P<extras>\[.*\])\s*)?$"
_PLAIN = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.:")
_METADATA_SUFFIXES = (".dist-info", ".egg-info", ".egg")
_FORMAT = 2  # 1: JSON
_PREFIX = "entry-points-"
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
        name, colon, attr = self.value.partition(":")
        # ASCII word characters and dots, one `:` at most, neither side empty: what the pattern
        # reads the same way (module before the `:`, attributes after); anything else takes it.
        plain = name and (attr or not colon) and ":" not in attr and _PLAIN.issuperset(name + attr)
        if not plain:
            match = re.match(_PATTERN, self.value)
            if match is None:
                raise ValueError(f"entry point {self.name!r} = {self.value!r} is not module[:attr]")
            name, attr = match.group("module"), match.group("attr") or ""
        module = import_module(name)
        return reduce(getattr, filter(None, attr.split(".")), module)


def cache_dir() -> Path:
    """`$XDG_CACHE_HOME/fleetscope` (default ~/.cache/fleetscope)."""
    from pathlib import Path

    return Path(_cache_folder())


def _cache_folder() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "fleetscope")


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
    state: list[Any] = [sys.executable, sys.prefix, sys.version]
    for entry in sys.path:
        where = os.path.abspath(entry or ".")
        state.append([where, *_stamp(where)])
        try:
            children = sorted(os.listdir(where))
        except OSError:  # a zip, a file or a missing folder: its own mtime covers it
            continue
        # Every run stats each installed distribution (~150 here): paths by plain concatenation,
        # not os.path.join, which was a fifth of this function's time.
        prefix = where + os.sep
        for child in children:
            lower = child.lower()
            if lower.endswith(_METADATA_SUFFIXES):
                state.append([child, *_stamp(f"{prefix}{child}{os.sep}entry_points.txt")])
                if lower.endswith(".egg"):
                    egg_info = os.path.join(prefix + child, "EGG-INFO", "entry_points.txt")
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


def _read(path: str, state: list[Any]) -> dict[str, list[list[str]]] | None:
    try:
        with open(path, "rb") as file:
            data = marshal.loads(file.read())
    except (OSError, ValueError, EOFError, TypeError):
        return None
    if not isinstance(data, dict) or data.get("format") != _FORMAT:
        return None
    if data.get("state") != state:
        return None
    groups = data.get("groups")
    return groups if isinstance(groups, dict) else None


def _write(path: str, state: list[Any], groups: dict[str, list[list[str]]]) -> None:
    folder = os.path.dirname(path)
    try:
        os.makedirs(folder, exist_ok=True)
        _prune(folder)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "wb") as file:
            file.write(marshal.dumps({"format": _FORMAT, "state": state, "groups": groups}))
        os.replace(tmp, path)
    except OSError:
        pass


def _prune(folder: str) -> None:
    """Remove the cache files neither written nor read (atime, as far as the file system keeps
    it) for `_STALE_S`, whatever their format; run only on a miss, which is rare."""
    now = time.time()
    for name in os.listdir(folder):
        if not name.startswith(_PREFIX):
            continue
        old = os.path.join(folder, name)
        try:
            st = os.stat(old)
            if now - max(st.st_atime, st.st_mtime) > _STALE_S:
                os.unlink(old)
        except OSError:
            pass


# The default cache's answer per `sys.path`, for the rest of the process (as fleetscope.plugins
# reads entry points: once per process), so that a second group costs no second stat walk.
_PROCESS: dict[tuple[str, ...], dict[str, list[list[str]]]] = {}


def entry_points(group: str, cache: str | os.PathLike[str] | None = None) -> list[EntryPoint]:
    """The installed entry points of `group`, in importlib.metadata's order; read from the cache
    file in `cache` (default `cache_dir()`, then kept for the process) when the path has not
    changed since it was written."""
    key = tuple(sys.path)
    groups = _PROCESS.get(key) if cache is None else None
    if groups is None:
        groups = _groups(_cache_folder() if cache is None else os.fspath(cache))
        if cache is None:
            _PROCESS[key] = groups
    return [EntryPoint(name, value, group) for name, value in groups.get(group, [])]


def _fnv1a(data: bytes) -> int:
    """FNV-1a, 32 bits: a stable digest (unlike `hash`) without an import (zlib's crc32 cost
    ~0.4 ms a run to import, issue 19; the key is a few hundred bytes)."""
    digest = 0x811C9DC5
    for byte in data:
        digest = ((digest ^ byte) * 0x01000193) & 0xFFFFFFFF
    return digest


def _groups(cache: str) -> dict[str, list[list[str]]]:
    state = _path_state()
    # The file name only spreads interpreters and paths over files; the full state is checked.
    digest = _fnv1a(repr([*state[:3], sys.path]).encode())
    path = os.path.join(cache, f"{_PREFIX}{digest:08x}.marshal")
    groups = _read(path, state)
    if groups is None:
        groups = _scan()
        _write(path, state, groups)
    return groups
