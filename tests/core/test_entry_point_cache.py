"""The entry-point cache answers what importlib.metadata answers, and a distribution installed,
rewritten or removed on the path is seen by the next call (no stale plug-in lists)."""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fleetscope import entry_point_cache
from fleetscope.entry_point_cache import EntryPoint, entry_points

GROUP = "fleetscope.test_cache_group"


def _install(site: Path, name: str, lines: str) -> Path:
    dist = site / f"{name}-0.1.dist-info"
    dist.mkdir(parents=True, exist_ok=True)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(f"[{GROUP}]\n{lines}\n")
    return dist


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.setattr(sys, "path", [str(site), *sys.path])
    return site


def _names(cache: Path) -> list[tuple[str, str]]:
    return [(ep.name, ep.value) for ep in entry_points(GROUP, cache)]


def test_the_cache_answers_what_importlib_metadata_answers(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    for group in ("fleetscope.server", "fleetscope.commands", "console_scripts"):
        real = [(ep.name, ep.value) for ep in importlib.metadata.entry_points(group=group)]
        assert [(ep.name, ep.value) for ep in entry_points(group, cache)] == real  # a miss
        assert [(ep.name, ep.value) for ep in entry_points(group, cache)] == real  # a hit
    assert len(list(cache.iterdir())) == 1


def test_installing_rewriting_and_removing_a_distribution_is_seen(
    site: Path, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    assert _names(cache) == []
    dist = _install(site, "acme", "one = json:dumps")
    assert _names(cache) == [("one", "json:dumps")]
    (dist / "entry_points.txt").write_text(f"[{GROUP}]\none = json:loads\ntwo = json\n")
    assert _names(cache) == [("one", "json:loads"), ("two", "json")]
    for file in dist.iterdir():
        file.unlink()
    dist.rmdir()
    assert _names(cache) == []


def test_a_corrupt_or_unwritable_cache_is_only_a_miss(site: Path, tmp_path: Path) -> None:
    _install(site, "acme", "one = json:dumps")
    cache = tmp_path / "cache"
    assert _names(cache) == [("one", "json:dumps")]
    for file in cache.iterdir():
        file.write_text("{not json")
    assert _names(cache) == [("one", "json:dumps")]
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    assert _names(blocked / "cache") == [("one", "json:dumps")]


def test_a_file_unused_for_a_week_goes_when_another_is_written(site: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    old, recent = cache / "entry-points-00000000.json", cache / "entry-points-11111111.json"
    for file in (old, recent):
        file.write_text("{}")
    week_ago = time.time() - 8 * 24 * 3600
    os.utime(old, (week_ago, week_ago))
    _install(site, "acme", "one = json:dumps")
    assert _names(cache) == [("one", "json:dumps")]  # a miss: written, and pruned
    assert not old.exists()
    assert recent.exists()


def test_load_follows_importlib_metadata_syntax() -> None:
    assert (
        EntryPoint("x", "json:JSONDecoder.decode", "g").load()
        is __import__("json").JSONDecoder.decode
    )
    assert EntryPoint("x", "json [extra]", "g").load() is __import__("json")
    with pytest.raises(ValueError):
        EntryPoint("x", "not a value!", "g").load()


def test_the_default_folder_follows_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert entry_point_cache.cache_dir() == tmp_path / "fleetscope"


def test_a_warm_cache_is_read_without_json_or_pathlib(tmp_path: Path) -> None:
    """Every command reads the cache: reading it imports no module the command line would not
    have imported anyway (json and pathlib cost ~7 ms of `fleetscope --version`, issue 19)."""
    probe = (
        "import sys\n"
        "before = set(sys.modules)\n"
        "from fleetscope.entry_point_cache import entry_points\n"
        "assert entry_points('fleetscope.commands')\n"
        "print(sorted({'json', 'pathlib'} & (set(sys.modules) - before)))"
    )
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    run = [sys.executable, "-c", probe]
    for _ in range(2):  # a miss, which scans with importlib.metadata, then a hit
        out = subprocess.run(run, capture_output=True, text=True, check=True, env=env).stdout
    assert out == "[]\n"
