"""Who owns a job: user, team and project, from what the tools teams already run.

- Kubernetes: the team is the first pod label named in `owners.k8s_team_labels` (default `team`),
  else the namespace; the user and project likewise from `owners.k8s_user_labels` /
  `owners.k8s_project_labels`. dcgm-exporter copies pod labels onto its series with
  `--kubernetes-enable-pod-labels`, sanitized to Prometheus label names and, depending on the
  version, prefixed; `label_value` accepts the bare, `pod_label_` and `label_` forms.
- Slurm: user and account from the job's environment (SLURM_JOB_USER, SLURM_JOB_ACCOUNT), the
  prolog-written record `<agent.slurm_job_dir>/<jobid>.env` (KEY=VALUE lines, deploy/slurm/
  prolog.sh), `scontrol show job` output or `sacct -P` output. The account is the team.

Parsers are pure functions over text; the one reader touches only the record directory it is
given. Must never: run scontrol/sacct itself or read other processes' memory.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "Owner",
    "k8s_owner",
    "label_value",
    "parse_sacct",
    "parse_scontrol_job",
    "read_job_record",
    "slurm_owner",
]

_SANITIZE = re.compile(r"[^a-zA-Z0-9_]")
_JOB_ID = re.compile(r"\A[0-9]+(?:_[0-9]+)?\Z")  # 123 or an array task 123_4


@dataclass(frozen=True)
class Owner:
    job_id: str
    user: str | None = None
    team: str | None = None
    project: str | None = None
    name: str | None = None
    source: str = ""

    def record(self) -> dict[str, str]:
        """The `POST /v1/jobs` record: only the fields known (a partial record erases nothing)."""
        out = {"job_id": self.job_id}
        for key in ("user", "team", "name"):
            value = getattr(self, key)
            if value:
                out[key] = value
        out["scheduler"] = self.source
        return out


def label_value(labels: Mapping[str, str], names: Sequence[str]) -> str | None:
    """The first non-empty label among `names`, bare or as dcgm-exporter writes pod labels."""
    for name in names:
        clean = _SANITIZE.sub("_", name)
        for key in (name, clean, f"pod_label_{clean}", f"label_{clean}"):
            value = labels.get(key)
            if value:
                return value
    return None


def k8s_owner(
    job_id: str,
    namespace: str | None,
    labels: Mapping[str, str],
    *,
    team_labels: Sequence[str] = ("team",),
    user_labels: Sequence[str] = ("user",),
    project_labels: Sequence[str] = ("project",),
) -> Owner:
    """Team from the first mapped pod label, else the namespace."""
    return Owner(
        job_id,
        user=label_value(labels, user_labels),
        team=label_value(labels, team_labels) or namespace or None,
        project=label_value(labels, project_labels),
        source="k8s",
    )


def slurm_owner(env: Mapping[str, str], source: str = "slurm-env") -> Owner | None:
    """From a Slurm job environment (or the prolog's record of it); None without a job id."""
    job_id = env.get("SLURM_JOB_ID", "").strip()
    if not job_id:
        return None
    return Owner(
        job_id,
        user=env.get("SLURM_JOB_USER") or None,
        team=env.get("SLURM_JOB_ACCOUNT") or None,
        project=env.get("SLURM_JOB_PARTITION") or None,
        name=env.get("SLURM_JOB_NAME") or None,
        source=source,
    )


def read_job_record(job_dir: Path, job_id: str) -> Owner | None:
    """The prolog's `<job_dir>/<job_id>.env`; None when absent, unreadable or malformed."""
    if not _JOB_ID.match(job_id):
        return None  # never a path outside job_dir
    try:
        text = (job_dir / f"{job_id}.env").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    env = {}
    for line in text.splitlines():
        key, sep, value = line.strip().partition("=")
        if sep and key and not key.startswith("#"):
            env[key.strip()] = value.strip().strip('"').strip("'")
    owner = slurm_owner(env, source="slurm-prolog")
    return owner if owner is not None and owner.job_id == job_id else None


def _without_uid(value: str | None) -> str | None:
    """'alice(10001)' -> 'alice'; '(null)' and empty -> None."""
    if not value or value == "(null)":
        return None
    return re.sub(r"\(\d+\)\Z", "", value) or None


def parse_scontrol_job(text: str) -> list[Owner]:
    """Every job in `scontrol show job` output: records separated by blank lines, or with `-o`
    one line per job (each starting JobId=)."""
    owners = []
    for block in re.split(r"\n\s*\n|\n(?=JobId=)", text.strip()):
        fields: dict[str, str] = {}
        for token in block.split():
            key, sep, value = token.partition("=")
            if sep and key not in fields:
                fields[key] = value
        job_id = fields.get("JobId")
        if not job_id:
            continue
        owners.append(
            Owner(
                job_id,
                user=_without_uid(fields.get("UserId")),
                team=_without_uid(fields.get("Account")),
                project=_without_uid(fields.get("Partition")),
                name=_without_uid(fields.get("JobName")),
                source="scontrol",
            )
        )
    return owners


def parse_sacct(text: str) -> list[Owner]:
    """`sacct -P` (pipe-separated, header line) output: one owner per job, steps skipped."""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    if not lines:
        return []
    header = [h.strip().lower() for h in lines[0].split("|")]
    if "jobid" not in header and "jobidraw" not in header:
        raise ValueError(f"sacct output has no JobID column: {lines[0]!r}")
    owners = []
    for line in lines[1:]:
        row = dict(zip(header, (v.strip() for v in line.split("|")), strict=False))
        # an array task: JobID "7_1", JobIDRaw "7" (its SLURM_JOB_ID, the id the agent names)
        job_id = row.get("jobidraw") or row.get("jobid") or ""
        if not job_id or "." in job_id:  # 3.batch, 3.extern: steps of job 3
            continue
        owners.append(
            Owner(
                job_id,
                user=row.get("user") or None,
                team=row.get("account") or None,
                project=row.get("partition") or None,
                name=row.get("jobname") or None,
                source="sacct",
            )
        )
    return owners


def merge(owners: Iterable[Owner]) -> dict[str, Owner]:
    """One owner per job: later sources fill what earlier ones left unknown."""
    out: dict[str, Owner] = {}
    for o in owners:
        known = out.get(o.job_id)
        if known is None:
            out[o.job_id] = o
            continue
        out[o.job_id] = Owner(
            o.job_id,
            user=known.user or o.user,
            team=known.team or o.team,
            project=known.project or o.project,
            name=known.name or o.name,
            source=known.source,
        )
    return out
