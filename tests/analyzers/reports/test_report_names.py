"""Team and user names become file names only after fleetscope.names made them safe.

Before issue 12 a team called `ml/vision` aborted `report weekly --all` (no such folder), and a
name like `../x` would have written outside the reports folder.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from app.cli import main
from fleetscope.names import file_name_part
from simulator.maker.jobs import Fleet, Job, write_segments
from warehouse.catalog import connect
from warehouse.catalog.fleet import Job as CatalogJob
from warehouse.catalog.fleet import upsert_jobs

MONDAY = datetime(2026, 11, 16, tzinfo=UTC)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("vision", "vision"),
        ("ml/vision", "ml_vision-688aa97f"),
        ("../up", "_up-8c722b8a"),
        ("..", "name-5ec1f7e7"),
        ("", "name-e3b0c442"),
    ],
)
def test_file_name_part(name: str, expected: str) -> None:
    assert file_name_part(name) == expected


def test_unsafe_and_safe_names_never_share_a_file() -> None:
    assert file_name_part("ml/vision") != file_name_part("ml_vision")


def test_weekly_all_writes_every_scope_whatever_it_is_called(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data"
    jobs = (
        Job("j1", ("e1",), (0,), 0, 6 * 3600, 0.5, user="a/b", team="ml/vision", name="x"),
        Job("j2", ("e1",), (1,), 0, 6 * 3600, 0.5, user="carol", team="../up", name="y"),
    )
    fleet = Fleet(
        clusters={"c": ("e1",)}, gpus_per_host=2, start=MONDAY, duration_s=86400,
        interval_s=600, jobs=jobs,
    )  # fmt: skip
    write_segments(fleet, data / "segments")
    engine = connect(f"sqlite:///{data / 'catalog.sqlite'}")
    with engine.begin() as conn:
        upsert_jobs(conn, [CatalogJob(j.job_id, user=j.user, team=j.team) for j in jobs])
    engine.dispose()
    monkeypatch.setenv("FLEETSCOPE_CORE_DATA_DIR", str(data))
    out = tmp_path / "reports"
    week = (MONDAY + timedelta(days=1)).strftime("%G-W%V")
    assert main(["report", "weekly", "--all", "--week", week, "--out", str(out), "--no-pdf"]) == 0
    written = sorted(p.name for p in (out / week).glob("*.html"))
    assert written == sorted(
        [
            "fleet.html",
            f"team-{file_name_part('ml/vision')}.html",
            f"team-{file_name_part('../up')}.html",
            f"user-{file_name_part('a/b')}.html",
            "user-carol.html",
        ]
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "reports"]  # nothing escaped
    assert "team ml/vision" in (out / week / f"team-{file_name_part('ml/vision')}.html").read_text()
    capsys.readouterr()
