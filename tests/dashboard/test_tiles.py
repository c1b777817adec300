"""How a window is split between roll-ups and raw samples (`dashboard.tiles.plan`)."""

from __future__ import annotations

from itertools import pairwise

from hypothesis import given
from hypothesis import strategies as st

from dashboard.tiles import Tile, plan

H, M = 3_600_000, 60_000
ROLLUPS = [("h", H, 10 * H), ("m", M, 10 * H + 30 * M)]


def test_whole_hours_then_minutes_then_raw() -> None:
    # From 01:58:30 to 10:45:10 with hours rolled up to 10:00 and minutes to 10:30.
    start, end = 2 * H - 90_000, 10 * H + 45 * M + 10_000
    assert plan(start, end, ROLLUPS, "raw") == [
        Tile("raw", 0, start, 2 * H - M),
        Tile("m", M, 2 * H - M, 2 * H),
        Tile("h", H, 2 * H, 10 * H),
        Tile("m", M, 10 * H, 10 * H + 30 * M),
        Tile("raw", 0, 10 * H + 30 * M, end),
    ]


def test_the_newest_bucket_of_a_roll_up_is_never_read() -> None:
    # Hours rolled up to 10:00 mean the 10:00 bucket may still have been filling.
    assert plan(9 * H, 11 * H, [("h", H, 10 * H)], "raw") == [
        Tile("h", H, 9 * H, 10 * H),
        Tile("raw", 0, 10 * H, 11 * H),
    ]


def test_without_roll_ups_everything_is_raw() -> None:
    assert plan(5, 9 * H, [("h", H, None), ("m", M, None)], "raw") == [Tile("raw", 0, 5, 9 * H)]
    assert plan(7, 7, ROLLUPS, "raw") == []


@given(
    start=st.integers(0, 30 * H),
    length=st.integers(1, 30 * H),
    newest_h=st.none() | st.integers(0, 40).map(lambda n: n * H),
    extra_m=st.integers(0, 120),
)
def test_tiles_cover_the_window_once_in_whole_buckets(
    start: int, length: int, newest_h: int | None, extra_m: int
) -> None:
    newest_m = None if newest_h is None else newest_h + extra_m * M
    tiles = plan(start, start + length, [("h", H, newest_h), ("m", M, newest_m)], "raw")
    assert tiles[0].start_ms == start and tiles[-1].end_ms == start + length
    for before, after in pairwise(tiles):
        assert before.end_ms == after.start_ms
    for tile in tiles:
        assert tile.start_ms < tile.end_ms
        if tile.bucket_ms:
            newest = newest_h if tile.table == "h" else newest_m
            assert newest is not None and tile.end_ms <= newest
            assert tile.start_ms % tile.bucket_ms == 0 and tile.end_ms % tile.bucket_ms == 0
