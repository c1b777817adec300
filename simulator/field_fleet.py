"""An independent fleet for `fleetscope eval`: dcgm-exporter pages of jobs that behave as real,
published jobs do, written without the rules' thresholds or the simulator (issue 13).

Where each job's behaviour comes from:
- `resnet-nw0` (input-bound): PyTorch's ResNet-50 sample with DataLoader num_workers=0 (kineto
  tb_plugin samples; HolisticTraceAnalysis 0.5.0 on it: GPU idle 39.4 % of the time, 97 % of that
  waiting on the host; the DataLoader is about 40 % of each step). Its GPU is busy ~0.6 of each
  sample; steps report the data wait.
- `starved` (input-bound, worse): the issue's field report: GPUs idle 65 % of the time waiting for
  input; steps report it.
- `resnet-fp32` : the same sample with num_workers=4 (GPU idle 24 %, DataLoader ~1 %), FP32
  kernels only (its kernel names are `...<float>` elementwise and cuDNN FP32 convolutions): busy,
  tensor pipe idle on a tensor-core GPU.
- `llama-ft` (healthy): a bf16 transformer fine-tune: busy > 95 %, SM active ~0.85, tensor ~0.45.
- `notebook` (small job): a whole 8-GPU node held for an interactive session that uses ~12 % of
  each GPU and 5 GB of 80 GB.
- `held` : an allocation nobody uses: 0 % for hours (job_defense_shield's motivating case).
- `hot` : a GPU at 89 C with its SM clock down at 1,095 MHz (the issue's field report), busy.
- `capped` : a busy GPU drawing its 700 W board limit with the SM clock at 1,600 MHz.
- `attn-mem` : a memory-bound kernel mix: DRAM ~0.9, SM ~0.3, busy.
- `xid79` : a GPU that falls off the bus (XID 79) and then sits at 0 %.
- `llm/pretrain-*` (healthy, SDK-attached with FLOPs): three bf16 transformer runs of one team
  on H100, their scripts reporting FLOPs per step (sdk.report_flops) at 43, 40 and 38 % MFU:
  Llama 3 405B's published range on H100 (Dubey et al. 2024, table 4: 38-43 % BF16 MFU).
- `llm/ft-eager` (low MFU): the same team's fine-tune, just as busy on DCGM (GPU_UTIL ~95 %),
  doing a quarter of its peers' model work (9 % MFU: eager fp32 attention, small micro-batches);
  its FLOPs per step say so, DCGM's utilization does not.
Exporters as found in the wild: no violation counters or clock-event reasons on any page; one
Slurm host without profiling fields; Kubernetes jobs known only by `pod`/`namespace` (team from a pod
label on some, the namespace on others); Slurm jobs only by `hpc_job`. Every sample carries an
exposition timestamp a day before the agent's clock (a replay).

Each job states the cause a person would name (`root`) and the rules that may also hold as its
symptoms (`may`); nothing here reads an analyzer's threshold. This module must never import
analyzers' rules or the simulator.
"""

from __future__ import annotations

import math
import random
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Final

H100: Final = ("NVIDIA H100 80GB HBM3", 81559, 1980.0, 700.0)  # model, FB MiB, max SM MHz, W
# NVIDIA H100 datasheet, H100 SXM: 1,979 TFLOPS BF16 with sparsity, half of it dense
H100_BF16_DENSE_FLOPS: Final = 989.5e12
V100: Final = ("Tesla V100-SXM2-32GB", 32768, 1530.0, 300.0)
PROF: Final = (
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
    "DCGM_FI_PROF_SM_ACTIVE",
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
    "DCGM_FI_PROF_DRAM_ACTIVE",
)


@dataclass(frozen=True)
class FieldJob:
    job_id: str  # as attribution names it: "<namespace>/<pod base>" or the hpc_job value
    host: str
    gpus: tuple[int, ...]
    minutes: float
    busy: float  # fraction of each sample with a kernel running
    sm_busy: float  # SM_ACTIVE while busy
    tensor_busy: float
    dram_busy: float
    fb_mib: float
    root: str | None  # the cause a person would name; None: healthy
    may: tuple[str, ...] = ()
    temp_c: float = 62.0
    sm_clock_mhz: float | None = None  # None: the model's maximum
    power_of_cap: float = 0.75
    data_wait_share: float | None = None  # steps reported by the training loop (SDK)
    mfu: float | None = None  # its script also reports FLOPs per step: mfu x the H100's peak
    xid_at_min: float | None = None
    labels: dict[str, str] = field(default_factory=dict)  # pod labels (Kubernetes jobs)
    user: str | None = None
    team: str | None = None


SYMPTOMS_OF_IDLE: Final = ("R3", "R2", "R4", "R5", "R6", "R11", "R12")
SYMPTOMS_OF_STARVED: Final = ("R2", "R4", "R6", "R11", "R12", "R9")


def jobs() -> list[FieldJob]:
    """The fleet: 7 hosts, 16 jobs (see the module docstring for where each comes from)."""
    return [
        FieldJob("vision/resnet-nw0", "k8s-a", (0, 1, 2, 3), 300, 0.606, 0.62, 0.0, 0.25, 9000,
                 "P1", (*SYMPTOMS_OF_STARVED, "R7"), data_wait_share=0.40,
                 labels={"pod_label_team": "vision"}, user="ann"),
        FieldJob("vision/starved", "k8s-a", (4, 5, 6, 7), 300, 0.35, 0.6, 0.3, 0.2, 30000,
                 "P1", SYMPTOMS_OF_STARVED, data_wait_share=0.65, user="ann"),
        FieldJob("nlp/llama-ft", "k8s-b", (0, 1, 2, 3, 4, 5, 6, 7), 360, 0.97, 0.86, 0.45,
                 0.35, 62000, None, labels={"pod_label_team": "nlp-core"}, user="bo"),
        FieldJob("41877", "slurm-c", (0, 1, 2, 3, 4, 5, 6, 7), 240, 0.12, 0.45, 0.05, 0.05,
                 5000, "R5", ("R2", "R4", "R6", "R11", "R12", "R7"), user="cy", team="physics"),
        FieldJob("41902", "slurm-d", (0, 1), 200, 0.0, 0.0, 0.0, 0.0, 600, "R1",
                 SYMPTOMS_OF_IDLE, user="cy", team="physics"),
        FieldJob("41950", "slurm-d", (2, 3), 300, 0.93, 0.8, 0.4, 0.3, 50000, "R16",
                 ("R14",), temp_c=89.0, sm_clock_mhz=1095.0, power_of_cap=0.7,
                 user="dee", team="chem"),
        FieldJob("41951", "slurm-d", (4, 5), 300, 0.95, 0.82, 0.42, 0.3, 50000, "R16", (),
                 sm_clock_mhz=1600.0, power_of_cap=0.995, user="dee", team="chem"),
        FieldJob("speech/attn-mem", "k8s-e", (0, 1, 2, 3), 300, 0.96, 0.3, 0.2, 0.9, 60000,
                 "R8", ("R6",), labels={"pod_label_team": "speech"}, user="eve"),
        FieldJob("speech/xid79", "k8s-e", (4,), 240, 0.9, 0.8, 0.4, 0.3, 40000, "R17",
                 ("R1", "R2", "R3", "R6", "R11", "R12", "R13"), xid_at_min=120, user="eve"),
        FieldJob("speech/notebook-8", "k8s-e", (5, 6, 7), 60, 0.9, 0.8, 0.4, 0.3, 20000,
                 None, ("R7",), user="eve"),
        FieldJob("legacy/resnet-fp32", "v100-f", (0, 1, 2, 3), 300, 0.757, 0.7, 0.0, 0.3,
                 14000, "R7", ("R6", "R11"), data_wait_share=0.01, user="fay"),
        FieldJob("legacy/bert-eval", "v100-f", (4, 5, 6, 7), 300, 0.9, 0.8, 0.35, 0.3, 20000,
                 None, user="fay"),
        FieldJob("llm/pretrain-8b", "k8s-g", (0, 1), 300, 0.97, 0.86, 0.46, 0.35, 70000, None,
                 data_wait_share=0.01, mfu=0.43, user="gus"),
        FieldJob("llm/pretrain-13b", "k8s-g", (2, 3), 300, 0.97, 0.85, 0.44, 0.35, 72000,
                 None, data_wait_share=0.01, mfu=0.40, user="gus"),
        FieldJob("llm/pretrain-70b", "k8s-g", (4, 5), 300, 0.96, 0.85, 0.43, 0.4, 76000, None,
                 data_wait_share=0.01, mfu=0.38, user="hal"),
        FieldJob("llm/ft-eager", "k8s-g", (6, 7), 300, 0.95, 0.78, 0.12, 0.45, 52000, "P4",
                 data_wait_share=0.01, mfu=0.09, user="hal"),
    ]  # fmt: skip


HOST_MODEL: Final = {"v100-f": V100}
NO_PROFILING: Final = {"slurm-d"}  # dcgm-exporter without the DCP module on one Slurm host


def _labels(job: FieldJob, gpu: int, model: str) -> str:
    common = (
        f'gpu="{gpu}",UUID="GPU-{zlib.crc32(job.host.encode()):08x}-0000-0000-0000-'
        f'{gpu:012d}",pci_bus_id="00000000:{0x18 + gpu:02X}:00.0",device="nvidia{gpu}",'
        f'modelName="{model}",Hostname="{job.host}",DCGM_FI_DRIVER_VERSION="570.133.20"'
    )
    if "/" in job.job_id:
        namespace, pod = job.job_id.split("/", 1)
        extra = "".join(f',{k}="{v}"' for k, v in sorted(job.labels.items()))
        return f'{common},container="main",namespace="{namespace}",pod="{pod}-worker-0"{extra}'
    return f'{common},hpc_job="{job.job_id}"'


def page(
    host_jobs: list[FieldJob], host: str, minute: float, ts_ms: int, rng: random.Random
) -> str:
    """One dcgm-exporter page (text format 0.0.4, timestamps on every sample) for one host."""
    model, fb_total, max_clock, cap_w = HOST_MODEL.get(host, H100)
    metrics: dict[str, list[str]] = {}
    for job in host_jobs:
        if minute >= job.minutes:
            continue
        dead = job.xid_at_min is not None and minute >= job.xid_at_min
        for gpu in job.gpus:
            busy = 0.0 if dead else min(1.0, max(0.0, job.busy + rng.gauss(0, 0.03)))
            if job.busy == 0.0:
                busy = 0.0
            values = {
                "DCGM_FI_DEV_SM_CLOCK": job.sm_clock_mhz or (max_clock if busy else 345.0),
                "DCGM_FI_DEV_MEM_CLOCK": 2619.0,
                "DCGM_FI_DEV_GPU_TEMP": job.temp_c + rng.gauss(0, 0.5),
                "DCGM_FI_DEV_POWER_USAGE": cap_w * (job.power_of_cap if busy else 0.1),
                "DCGM_FI_DEV_GPU_UTIL": round(100 * busy),
                "DCGM_FI_DEV_FB_FREE": fb_total - job.fb_mib,
                "DCGM_FI_DEV_FB_USED": job.fb_mib,
                "DCGM_FI_DEV_XID_ERRORS": 79.0 if dead else 0.0,
                "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": 0.0,
                "DCGM_FI_PROF_GR_ENGINE_ACTIVE": busy,
                "DCGM_FI_PROF_SM_ACTIVE": busy * job.sm_busy,
                "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": busy * job.tensor_busy,
                "DCGM_FI_PROF_DRAM_ACTIVE": busy * job.dram_busy,
            }
            for name, value in values.items():
                if host in NO_PROFILING and name in PROF:
                    continue
                metrics.setdefault(name, []).append(
                    f"{name}{{{_labels(job, gpu, model)}}} {value:g} {ts_ms}"
                )
    out = []
    for name, lines in metrics.items():
        out.append(f"# HELP {name} {name}.")
        out.append(f"# TYPE {name} {'counter' if name.endswith('COUNTER') else 'gauge'}")
        out.extend(lines)
    return "\n".join(out) + "\n"


def pages(
    origin_ms: int, hours: float, interval_s: int = 30, seed: int = 13
) -> Iterator[tuple[str, int, str]]:
    """(host, ts_ms, page text) for every scrape of every host, oldest first."""
    rng = random.Random(seed)
    fleet = jobs()
    hosts = sorted({j.host for j in fleet})
    for k in range(math.ceil(hours * 3600 / interval_s)):
        ts_ms = origin_ms + k * interval_s * 1000
        for host in hosts:
            text = page([j for j in fleet if j.host == host], host, k * interval_s / 60, ts_ms, rng)
            if "{" in text:
                yield host, ts_ms, text


def step_rows(origin_ms: int, step_s: float = 0.83) -> list[dict[str, object]]:
    """The training loop's step metrics (SDK) for jobs that report them: one row per 30 s."""
    rows: list[dict[str, object]] = []
    for job in jobs():
        if job.data_wait_share is None:
            continue
        for k in range(int(job.minutes * 2)):
            rows.append(
                {
                    "ts": origin_ms + k * 30_000,
                    "cluster": "field",
                    "host": job.host,
                    "job_id": job.job_id,
                    "rank": 0,
                    "step": k * 36,
                    "step_time_s": step_s,
                    "data_wait_s": step_s * job.data_wait_share,
                    "batch_size": 32,
                    "flops_per_step": None
                    if job.mfu is None
                    else job.mfu * H100_BF16_DENSE_FLOPS * step_s,
                    "compute_dtype": None if job.mfu is None else "bf16",
                }
            )
    return rows
