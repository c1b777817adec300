"""deploy/slurm/prolog.sh and epilog.sh, run as slurmd runs them (a job's SLURM_* environment, no
terminal), into a temporary folder: they write the job map in dcgm-exporter's HPC format (one file
per GPU index, one job id per line), jobstats' format ("<job id> <uid>") and the owner record the
agent reads (KEY=VALUE), and undo exactly their own job's part. Under Debian's /bin/sh (dash) and
bash; shellcheck finds nothing."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from collector.attribution.mapping_dir import MappingDir
from tests.collector.test_attribution import readings_of

SLURM = Path(__file__).resolve().parents[2] / "deploy" / "slurm"
DCGM_EXPORTER_FILE = re.compile(r"^\d+(\.\d+)?$")  # dcgm-exporter hpc.go validGPUFile

SHELLS = [s for s in ("sh", "bash")]


def run(script: str, shell: str, tmp_path: Path, **job: str) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": "/usr/bin:/bin",
        "FLEETSCOPE_JOB_MAP_DIR": str(tmp_path / "dcgm-job-map"),
        "FLEETSCOPE_GPUSTAT_DIR": str(tmp_path / "gpustat"),
        "FLEETSCOPE_SLURM_JOB_DIR": str(tmp_path / "slurm-jobs"),
        **job,
    }
    return subprocess.run(
        [shell, str(SLURM / script)], env=env, capture_output=True, text=True, timeout=30,
        stdin=subprocess.DEVNULL, check=False,
    )  # fmt: skip


def job_env(job_id: str, gpus: str, name: str = "llama-ft") -> dict[str, str]:
    return {
        "SLURM_JOB_ID": job_id,
        "SLURM_JOB_USER": "alice",
        "SLURM_JOB_UID": "1000",
        "SLURM_JOB_ACCOUNT": "ml-research",
        "SLURM_JOB_PARTITION": "gpu",
        "SLURM_JOB_NAME": name,
        "SLURM_JOB_GPUS": gpus,
    }


def files(folder: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(folder.iterdir()) if not p.name.startswith(".")}


@pytest.mark.parametrize("shell", SHELLS)
def test_prolog_writes_every_format_and_epilog_removes_only_its_job(
    shell: str, tmp_path: Path
) -> None:
    first = run("prolog.sh", shell, tmp_path, **job_env("918273", "0,1", "llama ft\nrun=2"))
    second = run("prolog.sh", shell, tmp_path, **job_env("918274", "1,2"))
    assert (first.returncode, first.stderr, second.returncode, second.stderr) == (0, "", 0, "")
    assert files(tmp_path / "dcgm-job-map") == {
        "0": "918273\n",
        "1": "918273\n918274\n",
        "2": "918274\n",
    }
    assert all(DCGM_EXPORTER_FILE.match(name) for name in files(tmp_path / "dcgm-job-map"))
    assert files(tmp_path / "gpustat") == {
        "0": "918273 1000\n",
        "1": "918274 1000\n",
        "2": "918274 1000\n",
    }
    assert (tmp_path / "slurm-jobs" / "918273.env").read_text() == (
        "SLURM_JOB_ID=918273\n"
        "SLURM_JOB_USER=alice\n"
        "SLURM_JOB_ACCOUNT=ml-research\n"
        "SLURM_JOB_PARTITION=gpu\n"
        "SLURM_JOB_NAME=llama ft run=2\n"  # a newline in a value becomes a space
        "SLURM_JOB_GPUS=0,1\n"
    )
    # The agent's mapping-dir source reads what the prolog wrote (first job of a shared GPU).
    source = MappingDir(tmp_path / "dcgm-job-map")
    source.refresh()
    page = "".join(f'DCGM_FI_DEV_GPU_UTIL{{gpu="{i}"}} 0\n' for i in range(4))
    assert [source.job_for(r) for r in readings_of(page)] == ["918273", "918273", "918274", None]

    done = run("epilog.sh", shell, tmp_path, **job_env("918273", "0,1"))
    assert (done.returncode, done.stderr) == (0, "")
    assert files(tmp_path / "dcgm-job-map") == {"1": "918274\n", "2": "918274\n"}
    assert files(tmp_path / "gpustat") == {"1": "918274 1000\n", "2": "918274 1000\n"}
    assert files(tmp_path / "slurm-jobs") == {
        "918274.env": (tmp_path / "slurm-jobs" / "918274.env").read_text()
    }
    run("epilog.sh", shell, tmp_path, **job_env("918274", "1,2"))
    assert (
        files(tmp_path / "dcgm-job-map")
        == files(tmp_path / "gpustat")
        == files(tmp_path / "slurm-jobs")
        == {}
    )


@pytest.mark.parametrize("shell", SHELLS)
def test_a_job_without_gpus_gets_only_its_owner_record(shell: str, tmp_path: Path) -> None:
    result = run("prolog.sh", shell, tmp_path, **job_env("77", ""))
    assert (result.returncode, result.stderr) == (0, "")
    assert list(files(tmp_path / "slurm-jobs")) == ["77.env"]
    assert not (tmp_path / "dcgm-job-map").exists()


@pytest.mark.parametrize("shell", SHELLS)
def test_problems_are_logged_and_never_fail_the_job(shell: str, tmp_path: Path) -> None:
    """A failing prolog drains the node: every problem is a line on stderr and exit status 0."""
    (tmp_path / "dcgm-job-map").write_text("a file where the folder should be")
    result = run("prolog.sh", shell, tmp_path, **job_env("918273", "0,GPU-1a2b"))
    assert result.returncode == 0
    assert "fleetscope prolog: job 918273:" in result.stderr
    assert "GPU 'GPU-1a2b' is not an index; skipped" in result.stderr
    assert files(tmp_path / "gpustat") == {"0": "918273 1000\n"}  # the rest still recorded
    missing = run("prolog.sh", shell, tmp_path)
    assert missing.returncode == 0
    assert "SLURM_JOB_ID missing or not a job id; nothing recorded" in missing.stderr
    assert run("epilog.sh", shell, tmp_path).returncode == 0


@pytest.mark.real_component("shellcheck")
def test_shellcheck_finds_nothing() -> None:
    shellcheck = shutil.which("shellcheck")
    if shellcheck is None:
        pytest.skip("shellcheck is not installed (Debian package `shellcheck`)")
    result = subprocess.run(
        [shellcheck, "-s", "sh", "prolog.sh", "epilog.sh"], cwd=SLURM, capture_output=True,
        text=True, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout
