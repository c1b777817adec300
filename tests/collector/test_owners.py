"""Owners from the tools teams already run (issue 13): Kubernetes namespace and pod labels through
the mapping, Slurm user/account from recorded real `scontrol`/`sacct` outputs (tests/data/slurm/)
and from the prolog's record; the agent's reporter delivers them to a real ingest server."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import select

from collector.http import UrllibTransport
from collector.owner_reporter import UNOWNED_RETRY_S, OwnerReporter
from collector.owners import (
    Owner,
    k8s_owner,
    parse_sacct,
    parse_scontrol_job,
    read_job_record,
)
from fleetscope.normalize import GpuReading
from fleetscope.settings import load_settings
from simulator.wire import TEST_TOKEN
from warehouse.catalog.fleet import jobs
from warehouse.ingest.runtime import Server

SLURM = Path(__file__).parents[1] / "data" / "slurm"


def test_scontrol_gives_user_and_account_without_the_uid() -> None:
    (gpu,) = parse_scontrol_job((SLURM / "scontrol_show_job_gpu.txt").read_text())
    assert (gpu.job_id, gpu.user, gpu.team, gpu.project, gpu.name) == (
        "260079",
        "username",
        "workshops",
        "titanx",
        "bash",
    )
    (ad,) = parse_scontrol_job((SLURM / "scontrol_show_job_email_user.txt").read_text())
    assert (ad.user, ad.team) == ("ksa@bio.aau.dk", "compute-account")


def test_sacct_gives_one_owner_per_job_and_skips_steps() -> None:
    assert parse_sacct((SLURM / "sacct_gpu_job.txt").read_text()) == [
        Owner("5", user="alice", team="project-a", source="sacct")
    ]
    (tacc,) = parse_sacct((SLURM / "sacct_tacc_stats.txt").read_text())
    assert (tacc.job_id, tacc.user, tacc.team, tacc.project, tacc.name) == (
        "1837137",
        "rtevans",
        "project140208",
        "normal",
        "jobname",
    )


def test_recorded_slurm_22_05_outputs_give_each_job_its_owner() -> None:
    """tests/data/slurm/recorded: a real slurmctld's `scontrol show job` in both layouts (records
    of lines, and `-o` one line per job) and slurmdbd's `sacct -P -X`, an array's tasks each under
    its own job id (JobIDRaw: 7_1 is job 7, the id SLURM_JOB_ID and the agent use)."""
    recorded = SLURM / "recorded"
    for name in ("scontrol_show_job_running.txt", "scontrol_show_job_o_running.txt"):
        (job,) = parse_scontrol_job((recorded / name).read_text())
        assert (job.job_id, job.user, job.team, job.project, job.name) == (
            "1", "alice", "ml-research", "gpu", "llama-ft",
        )  # fmt: skip
    for name in ("scontrol_show_job_array.txt", "scontrol_show_job_o_array_running.txt"):
        tasks = parse_scontrol_job((recorded / name).read_text())
        assert sorted((t.job_id, t.name) for t in tasks) == [
            ("2", "sweep"), ("3", "sweep"), ("4", "sweep"),
        ]  # fmt: skip
    owners = parse_sacct((recorded / "sacct_all_jobs.txt").read_text())
    assert [(o.job_id, o.name) for o in owners] == [
        ("1", "llama-ft"), ("3", "sweep"), ("4", "sweep"), ("2", "sweep"), ("6", "probe"),
        ("5", "probe"), ("8", "sweep"), ("7", "sweep"),
    ]  # fmt: skip
    assert {(o.user, o.team) for o in owners} == {("alice", "ml-research")}


@given(st.text())
def test_the_scontrol_parser_never_raises(text: str) -> None:
    for owner in parse_scontrol_job(text):
        assert owner.job_id


@given(st.lists(st.lists(st.text(alphabet="abc15.|_ ", max_size=8), max_size=5), max_size=5))
def test_the_sacct_parser_reads_any_table_under_a_jobid_header(rows: list[list[str]]) -> None:
    text = "\n".join(["JobID|User|Account", *("|".join(r) for r in rows)])
    for owner in parse_sacct(text):
        assert owner.job_id and "." not in owner.job_id


def test_the_prolog_record_names_user_and_account(tmp_path: Path) -> None:
    (tmp_path / "4242.env").write_text(
        "SLURM_JOB_ID=4242\nSLURM_JOB_USER=ann\nSLURM_JOB_ACCOUNT=vision\n"
        "SLURM_JOB_PARTITION=gpu\nSLURM_JOB_NAME=resnet\nSLURM_JOB_GPUS=0,1\n"
    )
    assert read_job_record(tmp_path, "4242") == Owner(
        "4242", user="ann", team="vision", project="gpu", name="resnet", source="slurm-prolog"
    )
    assert read_job_record(tmp_path, "999") is None
    assert read_job_record(tmp_path, "../4242") is None  # never a path outside the folder


def test_k8s_team_from_the_mapped_pod_label_else_the_namespace() -> None:
    labels = {"pod_label_team": "speech", "pod_label_user": "bo"}
    assert k8s_owner("ml/llama", "ml", labels) == Owner(
        "ml/llama", user="bo", team="speech", source="k8s"
    )
    assert k8s_owner("ml/llama", "ml", {}).team == "ml"
    custom = k8s_owner("ml/x", "ml", {"label_org_unit": "search"}, team_labels=("org-unit",))
    assert custom.team == "search"


def reading(job: str, **row: object) -> GpuReading:
    return GpuReading(row={"job_id": job, **row}, labels={"pod_label_team": "speech"})


def test_a_job_without_a_record_is_looked_up_again_only_after_the_retry(tmp_path: Path) -> None:
    now = [100.0]
    reporter = OwnerReporter(
        ingest_url="http://127.0.0.1:9",
        token="",
        transport=UrllibTransport(),
        slurm_job_dir=tmp_path,
        monotonic=lambda: now[0],
    )
    reporter.observe([reading("55", attribution="hpc_job")] * 8)  # the prolog has not run yet
    (tmp_path / "55.env").write_text("SLURM_JOB_ID=55\nSLURM_JOB_USER=di\n")
    reporter.observe([reading("55", attribution="hpc_job")])
    assert not reporter.wakeup.is_set()  # not read again on every tick
    now[0] += UNOWNED_RETRY_S
    reporter.observe([reading("55", attribution="hpc_job")])
    assert reporter.wakeup.is_set()  # found once the retry is due


def test_the_agent_reports_each_owner_once_to_a_real_server(tmp_path: Path) -> None:
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "77.env").write_text("SLURM_JOB_ID=77\nSLURM_JOB_USER=cy\n")
    settings = load_settings(env={}).with_overrides(
        core__data_dir=str(tmp_path / "data"),
        server__port=0,
        server__tokens=TEST_TOKEN,
        server__plugins="",
    )
    server = Server(settings)
    server.start()
    stop = threading.Event()
    try:
        reporter = OwnerReporter(
            ingest_url=server.url,
            token=TEST_TOKEN,
            transport=UrllibTransport(),
            slurm_job_dir=tmp_path / "jobs",
        )
        worker = threading.Thread(target=reporter.run, args=(stop, 0.05), daemon=True)
        worker.start()
        reporter.observe(
            [
                reading("ml/llama", attribution="k8s", namespace="ml", pod="llama-0"),
                reading("77", attribution="hpc_job"),
                reading("88", attribution="hpc_job"),  # no record: nothing known, nothing sent
            ]
        )
        deadline = time.monotonic() + 30
        rows: dict[str, tuple[str | None, str | None]] = {}
        while len(rows) < 2 and time.monotonic() < deadline:
            with server.catalog.connect() as conn:
                rows = {r.job_id: (r.user, r.team) for r in conn.execute(select(jobs))}
            time.sleep(0.05)
        assert rows == {"ml/llama": (None, "speech"), "77": ("cy", None)}
        assert reporter.flush() and not reporter._pending
    finally:
        stop.set()
        server.stop()


def test_the_agent_reads_what_the_real_prolog_writes(tmp_path: Path) -> None:
    from tests.deploy.test_slurm_scripts import job_env, run

    done = run("prolog.sh", "sh", tmp_path, **job_env("918273", "0,1", "llama ft\nrun=2"))
    assert done.returncode == 0, done.stderr
    assert read_job_record(tmp_path / "slurm-jobs", "918273") == Owner(
        "918273",
        user="alice",
        team="ml-research",
        project="gpu",
        name="llama ft run=2",
        source="slurm-prolog",
    )
