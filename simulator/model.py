"""What a simulated fleet is made of: hosts, GPU units (whole GPUs or MIG slices), jobs and where
they run, teams, models and user habits, all plain data. Split out of fleet.py, which plans the
jobs onto the fleet (simulator.fleet re-exports the public names).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from simulator.hardware import A100_PCIE, H100_SXM, MIG_LAYOUT, GpuModel
from simulator.scenarios import Scenario

WARMUP_S: Final = 86_400  # jobs are planned from a day before the range so it starts busy

TEAMS: Final[dict[str, tuple[str, ...]]] = {
    "team-nlp": ("alice", "bharat", "chen"),
    "team-vision": ("dmitri", "elena", "farah"),
    "team-speech": ("goran", "hana"),
    "team-recsys": ("ines", "jamal", "kofi"),
    "team-research": ("lena", "mateo"),
}
MODELS: Final[tuple[tuple[str, str], ...]] = (
    ("llama-3-8b", "llama3-8b"),
    ("llama-3-70b", "llama3-70b"),
    ("mistral-7b", "mistral-7b"),
    ("vit-l16", "vit-l16"),
    ("resnet50", "resnet50"),
    ("whisper-large-v3", "whisper"),
    ("bert-large", "bert-large"),
    ("dlrm-v2", "dlrm"),
    ("sdxl", "sdxl"),
    ("gpt-neox-20b", "neox-20b"),
)
PURPOSES: Final = ("ft", "pretrain", "sft", "dpo", "sweep", "distill")


@dataclass(frozen=True)
class Habit:
    """`share` of the jobs of `scenarios` are `user`'s, who runs no other jobs."""

    user: str
    team: str
    scenarios: frozenset[str]
    share: float


HABITS: Final[tuple[Habit, ...]] = (
    Habit("lena", "team-research", frozenset({"idle_allocation", "interactive_notebook"}), 0.8),
    Habit("jamal", "team-recsys", frozenset({"oversized_gpu"}), 0.8),  # the team's model server
)


def stable_seed(*parts: object) -> int:
    """A 63-bit seed from any printable parts; the same on every platform and Python version."""
    digest = hashlib.blake2b(repr(parts).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1


@dataclass(frozen=True)
class FleetSpec:
    hosts: int = 16
    seed: int = 7
    mig_hosts: int | None = None  # None: one MIG host when there are 4 hosts or more
    cluster: str = "default"
    scrape_failure_rate: float = 0.003  # share of scrapes answered 503 on every host
    flaky_failure_rate: float = 0.05  # on the one flaky host (the third), when there are 3+
    # A job from outside the simulation ("<namespace>/<name>", a Kubernetes job) holding the
    # last GPU of host 0 for the whole range, busy: the demo shows its real PyTorch process,
    # which runs on CPU, on a simulated GPU (the process itself reports its steps and FLOPs).
    attached_job: str | None = None
    # A scenario (SCENARIOS' name) that one simulated job runs on host 0's first GPU for the
    # whole range, whatever the seed: the demo's "first findings within a minute" (app/demo.py)
    # hold by construction, not by which jobs the seed happens to run when it starts.
    showcase: str | None = None


@dataclass(frozen=True)
class Host:
    index: int
    name: str
    scheduler: str  # "k8s" or "slurm"
    variant: str  # page layout, a key of render.VARIANTS
    model: GpuModel
    mig: bool
    scrape_failure_rate: float


@dataclass(frozen=True)
class Unit:
    """One allocatable GPU or MIG slice, as dcgm-exporter prints one series per field."""

    index: int
    host: int
    gpu_index: int
    uuid: str
    pci_bus_id: str
    mig_profile: str | None
    mig_instance_id: int | None
    fb_total_mib: int
    compute_share: float  # of the whole GPU (1.0 unless a MIG slice)


@dataclass(frozen=True)
class Placement:
    host: int
    units: tuple[int, ...]
    start_s: int
    end_s: int
    pod: str | None  # Kubernetes pod name; None on Slurm


@dataclass(frozen=True)
class Job:
    index: int
    job_id: str
    scenario: Scenario
    scheduler: str
    cluster: str
    user: str
    team: str
    name: str
    model: str
    placements: tuple[Placement, ...]

    @property
    def start_s(self) -> int:
        return self.placements[0].start_s

    @property
    def end_s(self) -> int:
        return self.placements[-1].end_s

    @property
    def n_gpus(self) -> int:
        if self.scenario.moves:
            return len(self.placements[0].units)
        return sum(len(p.units) for p in self.placements)

    @property
    def allocated_s(self) -> int:
        """Seconds each GPU of the job was held (a moved job is not held while it moves)."""
        if self.scenario.moves:
            return sum(p.end_s - p.start_s for p in self.placements)
        return self.end_s - self.start_s


def _hosts(spec: FleetSpec) -> list[Host]:
    n = spec.hosts
    mig = spec.mig_hosts if spec.mig_hosts is not None else (1 if n >= 4 else 0)
    width = max(2, len(str(n)))
    hosts: list[Host] = []
    for i in range(n):
        is_mig = i >= n - mig
        scheduler = "k8s" if is_mig or (i // 2) % 2 == 0 else "slurm"
        name = f"gpu-node-{i + 1:0{width}d}" if scheduler == "k8s" else f"dgx-b{i + 1:0{width}d}"
        rate = spec.flaky_failure_rate if (i == 2 and n >= 3) else spec.scrape_failure_rate
        hosts.append(
            Host(
                index=i,
                name=name,
                scheduler=scheduler,
                variant="release" if scheduler == "k8s" else "slurm",
                model=A100_PCIE if is_mig else H100_SXM,
                mig=is_mig,
                scrape_failure_rate=rate,
            )
        )
    return hosts


def _units(spec: FleetSpec, hosts: Sequence[Host]) -> list[Unit]:
    units: list[Unit] = []
    for host in hosts:
        for gpu in range(8):
            digest = hashlib.blake2b(f"{spec.seed}/{host.name}/{gpu}".encode(), digest_size=16)
            h = digest.hexdigest()
            uuid = f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"
            slices = MIG_LAYOUT if host.mig else (None,)
            for mig in slices:
                units.append(
                    Unit(
                        index=len(units),
                        host=host.index,
                        gpu_index=gpu,
                        uuid=uuid,
                        pci_bus_id=host.model.pci_bus_ids[gpu],
                        mig_profile=mig.profile if mig else None,
                        mig_instance_id=mig.instance_id if mig else None,
                        fb_total_mib=mig.fb_total_mib if mig else host.model.fb_total_mib,
                        compute_share=mig.compute_share if mig else 1.0,
                    )
                )
    return units
