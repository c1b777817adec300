"""`make bench-quick`'s floors live in bench/RESULTS.md next to their figures: every check has
exactly one, and the line format is read exactly. (Nothing here times anything.)"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench.quick import CHECKS, RESULTS, read_floors


def test_every_quick_check_has_one_floor_in_results() -> None:
    floors = read_floors(RESULTS.read_text())
    assert {check.key for check in CHECKS} <= set(floors)
    assert all(floor > 0 for floor in floors.values())


def test_a_floor_line_is_read_with_its_key_and_value() -> None:
    text = "x\nFloor for `make bench-quick` (traces, slowest): **floor 3.5x**; this run: 4x.\n"
    assert read_floors(text) == {"traces, slowest": 3.5}


def test_a_key_named_twice_is_refused() -> None:
    line = "Floor for `make bench-quick` (k): **floor 1x**\n"
    with pytest.raises(SystemExit, match="twice"):
        read_floors(line + line)


def test_lines_in_another_shape_are_not_floors() -> None:
    assert read_floors("Floor for make bench-quick (k): floor 1x\n**floor 2x**\n") == {}


@given(
    key=st.text(st.characters(blacklist_characters="()\n\r"), min_size=1, max_size=40),
    value=st.decimals(min_value=0, max_value=1000, places=2),
)
def test_any_key_and_value_round_trip(key: str, value: object) -> None:
    line = f"Floor for `make bench-quick` ({key}): **floor {value}x**"
    assert read_floors(line) == {key: float(str(value))}


def test_the_trace_floor_child_runs_on_a_real_trace() -> None:
    """bench/trace_command.py reaches into the loader's private names for its floor; a move in
    analyzers/traces must break this test, not the next benchmark run (it once did: `_open_gzip`
    moved to trace_text.py)."""
    from bench.trace_command import DEFAULT_TRACES, floor_child

    figures = floor_child(str(DEFAULT_TRACES / "hta_amd_mi250_minitoy"))
    assert set(figures) >= {"load_s", "floor_s"}
    assert all(seconds > 0 for seconds in figures.values())
