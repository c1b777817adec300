"""deploy/slurm/prolog.sh and epilog.sh, run as slurmd runs them (a job's SLURM_* environment, no
terminal), into a temporary folder: they write the job map in dcgm-exporter's HPC format (one file
per GPU index, one job id per line), jobstats' format ("<job id> <uid>") and the owner record the
agent reads (KEY=VALUE), and undo exactly their own job's part. Under Debian's /bin/sh (dash) and
bash; shellcheck finds nothing. The prolog also runs in the environment a real Slurm 22.05 slurmd
gave it (recorded, tests/data/slurm/recorded), which names no GPU, job name or array id: it then
reads them from `scontrol show job -d` (a stand-in printing the recorded output)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from collector.attribution.mapping_dir import MappingDir
from tests.collector.test_attribution import readings_of

SLURM = Path(__file__).resolve().parents[2] / "deploy" / "slurm"
RECORDED = Path(__file__).resolve().parents[1] / "data" / "slurm" / "recorded"
DCGM_EXPORTER_FILE = re.compile(r"^\d+(\.\d+)?$")  # dcgm-exporter hpc.go validGPUFile

SHELLS = [s for s in ("sh", "bash")]


def run(script: str, shell: str, tmp_path: Path, **job: str) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": "/usr/bin:/bin",
        "FLEETSCOPE_JOB_MAP_DIR": str(tmp_path / "dcgm-job-map"),
        "FLEETSCOPE_GPUSTAT_DIR": str(tmp_path / "gpustat"),
        "FLEETSCOPE_SLURM_JOB_DIR": str(tmp_path / "slurm-jobs"),
        "FLEETSCOPE_NVIDIA_PROC": str(tmp_path / "driver"),  # no driver unless a test writes one
        "FLEETSCOPE_SCONTROL": "",  # never ask a slurmctld unless a test gives a stand-in
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
        "SLURM_ARRAY_JOB_ID=\n"
        "SLURM_ARRAY_TASK_ID=\n"
        "SLURM_JOB_GPUS=0,1\n"
        "SLURM_GPU_MAP=0:0:-,1:1:-\n"  # no driver folder: Slurm's ids taken as NVML indices
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


# /proc/driver/nvidia/gpus/<bus id>/information as the NVIDIA driver (535) writes it, for a node
# whose device minor numbers (Slurm's GPU ids under gres.conf File=/dev/nvidia[0-2] or
# AutoDetect=nvml) do not follow the PCI bus order NVML and dcgm-exporter number GPUs in.
DRIVER = {
    "0000:07:00.0": ("GPU-5b2f0c2e-1b7a-4f8e-9d61-0a1b2c3d4e01", 2),
    "0000:0f:00.0": ("GPU-9c41d7aa-33c2-4b0e-8a77-0a1b2c3d4e02", 0),
    "0000:47:00.0": ("GPU-e0d4a1b9-7f21-4c6d-b3a5-0a1b2c3d4e03", 1),
}


def write_driver(tmp_path: Path) -> None:
    for bus, (uuid, minor) in DRIVER.items():
        folder = tmp_path / "driver" / "gpus" / bus
        folder.mkdir(parents=True)
        (folder / "information").write_text(
            "Model: \t\t NVIDIA A100-SXM4-80GB\nIRQ:   \t\t 130\n"
            f"GPU UUID: \t {uuid}\nVideo BIOS: \t 92.00.36.00.10\nBus Type: \t PCIe\n"
            "DMA Size: \t 47 bits\nDMA Mask: \t 0x7fffffffffff\n"
            f"Bus Location: \t {bus}\nDevice Minor: \t {minor}\nGPU Excluded:\t No\n"
        )


@pytest.mark.parametrize("shell", SHELLS)
def test_slurm_gpu_ids_are_mapped_to_nvml_indices_and_uuids(shell: str, tmp_path: Path) -> None:
    """Slurm GPU 0 is device minor 0, the second GPU in bus order: NVML index 1."""
    write_driver(tmp_path)
    array = {"SLURM_ARRAY_JOB_ID": "918200", "SLURM_ARRAY_TASK_ID": "7"}
    mig = "MIG-1f2e3d4c-5b6a-7980-a1b2-c3d4e5f60718"
    result = run("prolog.sh", shell, tmp_path, **job_env("918273", f"0,2,{mig}"), **array)
    assert (result.returncode, result.stderr) == (0, "")
    assert files(tmp_path / "dcgm-job-map") == {"0": "918273\n", "1": "918273\n"}
    uuid0, uuid2 = DRIVER["0000:0f:00.0"][0], DRIVER["0000:07:00.0"][0]
    assert files(tmp_path / "gpustat") == {  # by minor, GPU UUID and MIG UUID (jobstats)
        "0": "918273 1000\n", "2": "918273 1000\n", uuid0: "918273 1000\n",
        uuid2: "918273 1000\n", mig: "918273 1000\n",
    }  # fmt: skip
    record = (tmp_path / "slurm-jobs" / "918273.env").read_text().splitlines()
    assert "SLURM_ARRAY_JOB_ID=918200" in record and "SLURM_ARRAY_TASK_ID=7" in record
    assert f"SLURM_GPU_MAP=0:1:{uuid0},2:0:{uuid2},-:-:{mig}" in record
    missing = run("prolog.sh", shell, tmp_path, **job_env("918274", "5"))
    assert "GPU 5: no device minor 5 in " in missing.stderr and missing.returncode == 0
    done = run("epilog.sh", shell, tmp_path, **job_env("918273", "0,2"))
    assert (done.returncode, done.stderr) == (0, "")
    assert files(tmp_path / "dcgm-job-map") == files(tmp_path / "gpustat") == {}


def recorded_env(name: str) -> dict[str, str]:
    """A prolog environment slurmd 22.05 gave (`env | sort`), less PATH, PWD and SHLVL."""
    lines = (RECORDED / name).read_text().splitlines()
    env = dict(line.split("=", 1) for line in lines)
    return {k: v for k, v in env.items() if k not in {"PATH", "PWD", "SHLVL", "_"}}


def scontrol_stand_in(tmp_path: Path) -> Path:
    """`scontrol show job -d ID` prints the recorded output for ID; `show hostnames X` prints X
    (one node, as the real one prints it); each call is logged."""
    script = tmp_path / "scontrol"
    script.write_text(
        "#!/bin/sh\n"
        f'echo "$*" >> {tmp_path / "scontrol-calls"}\n'
        'case "$1 $2 $3" in\n'
        f'  "show job -d") cat "{RECORDED}/scontrol_show_job_d_$(\n'
        '      case "$4" in 1) echo running ;; *) echo "array_task_$4" ;; esac).txt" ;;\n'
        '  "show hostnames "*) echo "$3" ;;\n'
        "  *) exit 1 ;;\n"
        "esac\n"
    )
    script.chmod(0o755)
    return script


@pytest.mark.parametrize("shell", SHELLS)
@pytest.mark.parametrize(
    ("env_file", "job", "gpus", "name", "array"),
    [
        ("prolog-gpu-job.env", "1", {"0": "1\n", "1": "1\n"}, "llama-ft", ("", "")),
        ("prolog-array-task-7.env", "7", {"1": "7\n"}, "sweep", ("7", "1")),
        ("prolog-array-task-8.env", "8", {"0": "8\n"}, "sweep", ("7", "0")),
    ],
)
def test_in_slurm_22_05_s_real_environment_the_prolog_asks_scontrol(
    shell: str,
    env_file: str,
    job: str,
    gpus: dict[str, str],
    name: str,
    array: tuple[str, str],
    tmp_path: Path,
) -> None:
    """Job 7's `scontrol show job -d 7` lists the array's other task second: only its first
    record counts."""
    env = recorded_env(env_file)
    assert env["SLURM_JOB_ID"] == job and "SLURM_JOB_GPUS" not in env
    stand_in = scontrol_stand_in(tmp_path)
    result = run("prolog.sh", shell, tmp_path, **env, FLEETSCOPE_SCONTROL=str(stand_in))
    assert (result.returncode, result.stderr) == (0, "")
    assert files(tmp_path / "dcgm-job-map") == gpus
    record = (tmp_path / "slurm-jobs" / f"{job}.env").read_text().splitlines()
    ids = ",".join(sorted(gpus))
    assert record == [
        f"SLURM_JOB_ID={job}", "SLURM_JOB_USER=alice", "SLURM_JOB_ACCOUNT=ml-research",
        "SLURM_JOB_PARTITION=gpu", f"SLURM_JOB_NAME={name}", f"SLURM_ARRAY_JOB_ID={array[0]}",
        f"SLURM_ARRAY_TASK_ID={array[1]}", f"SLURM_JOB_GPUS={ids}",
        "SLURM_GPU_MAP=" + ",".join(f"{g}:{g}:-" for g in sorted(gpus)),
    ]  # fmt: skip
    assert (tmp_path / "scontrol-calls").read_text().splitlines() == [
        f"show job -d {job}",
        "show hostnames vm",
    ]
    done = run("epilog.sh", shell, tmp_path, SLURM_JOB_ID=job)
    assert (done.returncode, done.stderr) == (0, "")
    assert files(tmp_path / "dcgm-job-map") == files(tmp_path / "slurm-jobs") == {}


@pytest.mark.parametrize("shell", SHELLS)
def test_a_failing_scontrol_is_logged_and_the_job_recorded_without_gpus(
    shell: str, tmp_path: Path
) -> None:
    failing = tmp_path / "scontrol"
    failing.write_text(
        "#!/bin/sh\necho 'slurm_load_jobs error: Invalid job id specified' >&2\nexit 1\n"
    )
    failing.chmod(0o755)
    env = recorded_env("prolog-gpu-job.env")
    result = run("prolog.sh", shell, tmp_path, **env, FLEETSCOPE_SCONTROL=str(failing))
    assert result.returncode == 0
    assert result.stderr == (
        f"fleetscope prolog: job 1: {failing} show job -d 1 failed: "
        "slurm_load_jobs error: Invalid job id specified\n"
    )
    assert list(files(tmp_path / "slurm-jobs")) == ["1.env"]
    assert not (tmp_path / "dcgm-job-map").exists()


@pytest.mark.real_component("shellcheck")
def test_shellcheck_finds_nothing() -> None:
    shellcheck = shutil.which("shellcheck")
    if shellcheck is None:
        pytest.skip("shellcheck is not installed (Debian package `shellcheck`)")
    result = subprocess.run(
        [shellcheck, "-s", "sh", "prolog.sh", "epilog.sh", "slurmctld-epilog.sh"], cwd=SLURM, capture_output=True,
        text=True, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout
