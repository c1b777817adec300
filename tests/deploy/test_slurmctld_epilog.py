"""deploy/slurm/slurmctld-epilog.sh stores a finished job's fleetscope summary in AdminComment.

Run as slurmctld runs it (SLURM_JOB_ID, no terminal) under dash and bash, against a real server
with the read API on loopback, with real curl, gzip and base64; `scontrol` is the one stand-in
(there is no slurmctld here): a script on PATH that records its arguments, as `scontrol update`
receives them. The stored text is read back as `sacct -P -o JobID,AdminComment` prints it.

Job 918273 (2 GPUs on gpu-07, two hours of samples through the server's ingest: GPU 0 at 97.5 %
GPU_UTIL with 78,000 MiB of its 81,559 MiB used, GPU 1 at 12 % with 4,000 MiB; R1 4.0 and R3 3.0
GPU-hours in the same window, counted once: 4.0 recoverable; an acknowledged R2 finding left out).
The summary's GPU part is jobstats' layout (analyzers/read_api/summary.py).
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from analyzers.read_api.summary import decode
from fleetscope.settings import load_settings
from simulator.maker.series import Fleet
from simulator.wire import TEST_TOKEN, post_batch
from tests.readable import eventually
from warehouse.catalog import findings as cat
from warehouse.catalog import fleet
from warehouse.ingest.runtime import Server
from warehouse.read import reader

SCRIPT = Path(__file__).resolve().parents[2] / "deploy" / "slurm" / "slurmctld-epilog.sh"
READ_TOKEN = "slurmctld-read-token-for-tests"
NOW = datetime.now(UTC)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("slurmctld")
    running = Server(
        load_settings(env={}).with_overrides(
            core__data_dir=str(root),
            server__port=0,
            server__tokens=TEST_TOKEN,
            server__read_tokens=READ_TOKEN,
            server__plugins="analyzers.read_api",
            warehouse__maintenance_interval_s=3600.0,
        )
    )
    running.start()
    end = NOW - timedelta(minutes=5)
    samples = Fleet().gpus(
        "918273", "gpu-07", [0], 0, 120, gpu_util=97.5, fb_used_mib=78000.0, fb_free_mib=3559.0
    )
    samples.gpus("918273", "gpu-07", [1], 0, 120, gpu_util=12.0, fb_used_mib=4000.0,
                 fb_free_mib=77559.0)  # fmt: skip
    samples.gpus("other", "gpu-07", [2], 0, 120, gpu_util=50.0)  # another job: not counted
    gpu = samples.tables()["gpu_samples"]
    assert post_batch(running.url, "gpu_samples", gpu, token=TEST_TOKEN).status == 202

    def stored() -> int:  # readable after the ingest log's next flush
        (rows,) = reader.connect(running.settings).execute(
            "SELECT count(*) FROM gpu_samples"
        ).fetchone() or (0,)
        return int(rows)

    assert eventually(stored, gpu.num_rows) == gpu.num_rows

    def finding(fid: str, rule: str, hours: float, title: str) -> cat.Finding:
        return cat.Finding(
            finding_id=fid, rule_id=rule, severity="warn", window_start=end - timedelta(hours=1),
            window_end=end, wasted_gpu_hours=hours, job_id="918273", team="ml", host="gpu-07",
            evidence={"_meta": {"title": title}},
        )  # fmt: skip

    with running.catalog.begin() as conn:
        fleet.upsert_jobs(conn, [fleet.Job("918273", cluster="della", team="ml", user="alice")])
        fleet.record_allocations(
            conn,
            [fleet.Allocation("918273", "gpu-07", i, None, None, end - timedelta(hours=2), end)
             for i in (0, 1)],
        )  # fmt: skip
        cat.upsert_findings(
            conn,
            [
                finding("a", "R1", 4.0, "GPUs allocated but idle"),
                finding("b", "R3", 3.0, "Idle while the job runs"),
                finding("c", "R2", 1.0, "Low utilization"),
            ],
            run_id=None,
        )
        cat.set_finding_state(conn, "c", "acknowledged")
    try:
        yield running
    finally:
        running.stop()


def epilog(
    tmp_path: Path, shell: str, url: str, job: str
) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """Run the epilog; its result and the arguments each `scontrol` call received."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    calls = tmp_path / "scontrol-calls"
    scontrol = bin_dir / "scontrol"
    scontrol.write_text(f'#!/bin/sh\nfor a in "$@"; do printf "%s\\n" "$a"; done >> {calls}\n')
    scontrol.chmod(0o755)
    token = tmp_path / "read-token"
    token.write_text(READ_TOKEN + "\n")
    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "SLURM_JOB_ID": job,
        "FLEETSCOPE_URL": url,
        "FLEETSCOPE_READ_TOKEN_FILE": str(token),
        "FLEETSCOPE_DEFAULTS": "",
    }
    result = subprocess.run(
        [shell, str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60,
        stdin=subprocess.DEVNULL, check=False,
    )  # fmt: skip
    recorded = calls.read_text().splitlines() if calls.exists() else []
    return result, recorded


@pytest.mark.parametrize("shell", ["sh", "bash"])
def test_the_summary_lands_in_admin_comment(server: Server, tmp_path: Path, shell: str) -> None:
    result, calls = epilog(tmp_path, shell, server.url, "918273")
    assert (result.returncode, result.stderr) == (0, "")
    assert calls[:2] == ["update", "JobId=918273"]
    field, _, comment = calls[2].partition("=")
    assert field == "AdminComment" and comment.startswith("FS1:")
    sacct = f"918273|{comment}\n"  # `sacct -P -n -j 918273 -o JobID,AdminComment%-4000`
    job_id, stored = sacct.rstrip("\n").split("|")
    assert job_id == "918273"
    mib = 1024 * 1024
    assert decode(stored) == {
        "v": 2,
        "job_id": "918273",
        "gpus": 2,
        "total_time": 7190,  # 720 samples 10 s apart
        "nodes": {
            "gpu-07": {
                "gpu_utilization": {"0": 97.5, "1": 12.0},
                "gpu_used_memory": {"0": 78000 * mib, "1": 4000 * mib},
                "gpu_total_memory": {"0": 81559 * mib, "1": 81559 * mib},
            }
        },
        "recoverable_gpu_hours": 4.0,
        "findings": [
            {
                "rule": "R1",
                "severity": "warn",
                "gpu_hours": 4.0,
                "title": "GPUs allocated but idle",
            },
            {
                "rule": "R3",
                "severity": "warn",
                "gpu_hours": 3.0,
                "title": "Idle while the job runs",
            },
        ],
    }
    assert len(comment) < 600  # compact: AdminComment is one text column per job


def test_a_job_fleetscope_never_saw_is_left_alone(server: Server, tmp_path: Path) -> None:
    result, calls = epilog(tmp_path, "sh", server.url, "5")
    assert (result.returncode, result.stderr, calls) == (0, "", [])


def test_an_unreachable_server_is_logged_and_never_fails_the_job(tmp_path: Path) -> None:
    result, calls = epilog(tmp_path, "sh", "http://127.0.0.1:9", "918273")
    assert result.returncode == 0 and calls == []
    assert result.stderr.startswith(
        "fleetscope slurmctld epilog: job 918273: GET http://127.0.0.1:9/"
    )
