"""Sources: NVML through a fake library object injected at the boundary, host metrics from a fake
cgroup v2 tree, node_exporter from a real HTTP server, dcgm-exporter failures."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from collector.sources.cgroups import allowed_cores
from collector.sources.dcgm import DcgmSource
from collector.sources.host import PsutilHostSource
from collector.sources.node_exporter import NodeExporterSource
from collector.sources.nvml import NvmlSource
from collector.sources.rates import cpu_mode_pcts
from fleetscope.errors import MetricsParseError, SourceUnavailableError


class FakeNvml:
    """The pynvml functions NvmlSource calls, over two fake GPUs; GPU 1 is an old board that
    answers NVMLError_NotSupported for clocks-event reasons and PCIe throughput."""

    class NVMLError(Exception):
        pass

    class NVMLError_NotSupported(NVMLError):
        pass

    class NVMLError_Timeout(NVMLError):
        pass

    NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 1, 2, 0
    NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC = 1, 0
    NVML_PCIE_UTIL_TX_BYTES, NVML_PCIE_UTIL_RX_BYTES = 0, 1
    NVML_PERF_POLICY_POWER, NVML_PERF_POLICY_THERMAL = 0, 1
    nvmlEventTypeXidCriticalError = 8

    @dataclass
    class Util:
        gpu: int
        memory: int

    @dataclass
    class Mem:
        total: int
        used: int
        free: int

    @dataclass
    class Proc:
        pid: int
        usedGpuMemory: int | None

    @dataclass
    class Violation:
        referenceTime: int
        violationTime: int

    @dataclass
    class Event:
        device: Any
        eventType: int
        eventData: int

    def __init__(self) -> None:
        self.handles = [object(), object()]
        self.events: list[FakeNvml.Event] = [FakeNvml.Event(self.handles[1], 8, 79)]
        self.shut = False

    def _i(self, handle: Any) -> int:
        return self.handles.index(handle)

    def nvmlInit(self) -> None: ...
    def nvmlShutdown(self) -> None:
        self.shut = True

    def nvmlDeviceGetCount(self) -> int:
        return 2

    def nvmlDeviceGetHandleByIndex(self, i: int) -> Any:
        return self.handles[i]

    def nvmlDeviceGetIndex(self, h: Any) -> int:
        return self._i(h)

    def nvmlDeviceGetUUID(self, h: Any) -> str:
        return f"GPU-fake-{self._i(h)}"

    def nvmlDeviceGetName(self, h: Any) -> str:
        return "NVIDIA H100 80GB HBM3"

    def nvmlDeviceGetUtilizationRates(self, h: Any) -> Util:
        return FakeNvml.Util(gpu=[97, 0][self._i(h)], memory=[40, 0][self._i(h)])

    def nvmlDeviceGetMemoryInfo(self, h: Any) -> Mem:
        mib = 1024 * 1024
        return FakeNvml.Mem(
            total=81559 * mib,
            used=[70000, 0][self._i(h)] * mib,
            free=[11559, 81559][self._i(h)] * mib,
        )

    def nvmlDeviceGetPowerUsage(self, h: Any) -> int:
        return [612345, 71000][self._i(h)]  # milliwatts

    def nvmlDeviceGetTemperature(self, h: Any, sensor: int) -> int:
        return [71, 33][self._i(h)]

    def nvmlDeviceGetClockInfo(self, h: Any, clock: int) -> int:
        return {1: 1980, 2: 2619}[clock]

    def nvmlDeviceGetCurrentClocksEventReasons(self, h: Any) -> int:
        if self._i(h) == 1:
            raise FakeNvml.NVMLError_NotSupported("Not Supported")
        return 0x4  # SW power cap

    def nvmlDeviceGetTotalEccErrors(self, h: Any, kind: int, counter: int) -> int:
        return [0, 2][self._i(h)]

    def nvmlDeviceGetPcieThroughput(self, h: Any, counter: int) -> int:
        if self._i(h) == 1:
            raise FakeNvml.NVMLError_NotSupported("Not Supported")
        return [1000, 2000][counter]  # KB/s

    def nvmlDeviceGetViolationStatus(self, h: Any, policy: int) -> Violation:
        return FakeNvml.Violation(referenceTime=0, violationTime=[5_000_000, 0][policy])  # ns

    def nvmlDeviceGetPcieReplayCounter(self, h: Any) -> int:
        return 3

    def nvmlDeviceGetComputeRunningProcesses(self, h: Any) -> list[Proc]:
        if self._i(h) == 0:
            return [FakeNvml.Proc(4242, 69000 * 1024 * 1024), FakeNvml.Proc(4243, None)]
        return []

    def nvmlEventSetCreate(self) -> str:
        return "set"

    def nvmlDeviceRegisterEvents(self, h: Any, types: int, event_set: str) -> None: ...

    def nvmlEventSetWait_v2(self, event_set: str, timeout_ms: int) -> Event:
        if not self.events:
            raise FakeNvml.NVMLError_Timeout("Timeout")
        return self.events.pop(0)

    def nvmlEventSetFree(self, event_set: str) -> None: ...


def test_nvml_source_reads_every_field_in_contract_units() -> None:
    nvml = FakeNvml()
    source = NvmlSource(nvml, cluster="c", host="h")
    busy, idle = source.read(1000)
    assert busy.row == {
        "ts": 1000, "cluster": "c", "host": "h", "gpu_index": 0, "gpu_uuid": "GPU-fake-0",
        "gpu_model": "NVIDIA H100 80GB HBM3", "mig_profile": None, "mig_instance_id": None,
        "job_id": None, "attribution": None, "pod": None, "namespace": None, "container": None,
        "gpu_util": 97.0, "mem_copy_util": 40.0, "fb_used_mib": 70000.0, "fb_free_mib": 11559.0,
        "power_w": 612.345, "temp_c": 71.0, "sm_clock_mhz": 1980.0, "mem_clock_mhz": 2619.0,
        "pcie_tx_bytes_s": 1024000.0, "pcie_rx_bytes_s": 2048000.0, "xid_last": 0.0,
        "ecc_dbe_total": 0.0, "pcie_replay_total": 3.0, "power_violation_us": 5000.0,
        "thermal_violation_us": 0.0, "clocks_event_reasons": 4.0,
        "extra": {"processes": 2.0, "process_fb_used_mib:4242": 69000.0},
    }  # fmt: skip
    # GPU 1: unsupported queries are nulls, the XID event is its last XID.
    assert (idle.row["clocks_event_reasons"], idle.row["pcie_tx_bytes_s"]) == (None, None)
    assert (idle.row["xid_last"], idle.row["ecc_dbe_total"], idle.row["gpu_util"]) == (
        79.0,
        2.0,
        0.0,
    )
    assert idle.row["extra"] == {"processes": 0.0}
    assert source.pid_gpus() == {4242: ["GPU-fake-0"], 4243: ["GPU-fake-0"]}
    source.close()
    assert nvml.shut


def _cgroup_job(
    root: Path, job: str, usage: int, user: int, system: int, mem: int, io: tuple[int, int]
) -> None:
    path = root / "system.slice" / "slurmstepd.scope" / f"job_{job}"
    path.mkdir(parents=True, exist_ok=True)
    (path / "cpu.stat").write_text(f"usage_usec {usage}\nuser_usec {user}\nsystem_usec {system}\n")
    (path / "memory.current").write_text(f"{mem}\n")
    (path / "memory.max").write_text("max\n")
    (path / "io.stat").write_text(f"259:0 rbytes={io[0]} wbytes={io[1]} rios=1 wios=1\n")


def test_host_source_gives_a_host_row_and_per_job_cgroup_rows(tmp_path: Path) -> None:
    now = [100.0]
    _cgroup_job(tmp_path, "918273", 0, 0, 0, 1 << 30, (0, 0))
    source = PsutilHostSource(cluster="c", host="h", cgroup_root=tmp_path, clock=lambda: now[0])
    first = source.read(1)
    assert [r["job_id"] for r in first] == [None, "918273"]
    assert first[1]["cpu_user_pct"] is None  # no interval yet
    assert first[1]["cpu_cores"] == first[0]["cpu_cores"]  # no cpuset or quota: the whole host
    now[0] = 102.0
    _cgroup_job(tmp_path, "918273", 3_000_000, 2_000_000, 1_000_000, 2 << 30, (4096, 8192))
    host, job = source.read(2)
    # Whole-host values are the real machine's: present, in range (CPU percentages need the
    # kernel's tick counters to have moved between the two reads, so they may still be None).
    assert 0 < host["mem_used_bytes"] <= host["mem_total_bytes"]  # type: ignore[operator]
    assert host["cpu_user_pct"] is None or 0 <= host["cpu_user_pct"] <= 100  # type: ignore[operator]
    cores = host["cpu_cores"]
    assert isinstance(cores, float)
    assert job == {
        "ts": 2, "cluster": "c", "host": "h", "job_id": "918273",
        "cpu_user_pct": 1_000_000 * 100.0 / (1e6 * cores),
        "cpu_system_pct": 500_000 * 100.0 / (1e6 * cores),
        "cpu_iowait_pct": None, "cpu_cores": cores, "mem_used_bytes": float(2 << 30),
        "mem_total_bytes": None, "net_rx_bytes_s": None, "net_tx_bytes_s": None,
        "disk_read_bytes_s": 2048.0, "disk_write_bytes_s": 4096.0, "load1": None,
    }  # fmt: skip


def test_a_host_busy_in_one_mode_reads_exactly_100_percent_of_it() -> None:
    # The counters of a host up for weeks: the difference of their two sums once read
    # 100.00000000909495 % user on a CI machine whose only moving mode was user.
    before = {"user": 1_234_567.89, "system": 98_765.43, "idle": 7_654_321.01, "iowait": 12.5}
    after = {**before, "user": before["user"] + 0.3}
    only_user = {"user": 100.0, "system": 0.0, "idle": 0.0, "iowait": 0.0}
    assert cpu_mode_pcts(after, before) == only_user
    # Linux's iowait can go back: it counts as 0 and takes nothing from the other modes.
    assert cpu_mode_pcts({**after, "iowait": 10.0}, before) == only_user
    assert cpu_mode_pcts(before, before) is None  # no time passed


@given(
    st.dictionaries(
        st.sampled_from(["user", "system", "idle", "iowait", "steal"]),
        st.tuples(st.floats(0, 1e9, allow_nan=False), st.floats(-1e3, 1e3, allow_nan=False)),
        min_size=1,
    )
)
def test_cpu_mode_percentages_are_within_0_and_100(modes: dict[str, tuple[float, float]]) -> None:
    before = {mode: start for mode, (start, _) in modes.items()}
    after = {mode: start + step for mode, (start, step) in modes.items()}
    pcts = cpu_mode_pcts(after, before)
    assert pcts is None or all(0.0 <= pct <= 100.0 for pct in pcts.values())


@pytest.mark.parametrize(
    ("cpuset", "cpu_max", "allowed"),
    [
        ("0-3,8-11\n", "max 100000\n", 8.0),  # Slurm's task/affinity: the allocated cores
        (None, "150000 100000\n", 1.5),  # a CPU quota
        ("0-3\n", "200000 100000\n", 2.0),  # both: the tighter one
        ("5\n", None, 1.0),
        (None, None, None),  # unlimited: the whole host
        ("garbage\n", "max\n", None),
    ],
)
def test_a_jobs_cpu_allowance_is_its_cpuset_or_quota(
    tmp_path: Path, cpuset: str | None, cpu_max: str | None, allowed: float | None
) -> None:
    if cpuset is not None:
        (tmp_path / "cpuset.cpus.effective").write_text(cpuset)
    if cpu_max is not None:
        (tmp_path / "cpu.max").write_text(cpu_max)
    assert allowed_cores(tmp_path) == allowed


def test_job_cpu_percentages_are_of_the_cores_the_job_may_use(tmp_path: Path) -> None:
    now = [100.0]
    _cgroup_job(tmp_path, "42", 0, 0, 0, 1 << 30, (0, 0))
    job_dir = tmp_path / "system.slice" / "slurmstepd.scope" / "job_42"
    (job_dir / "cpuset.cpus.effective").write_text("0-1\n")
    (job_dir / "cpu.max").write_text("150000 100000\n")
    source = PsutilHostSource(cluster="c", host="h", cgroup_root=tmp_path, clock=lambda: now[0])
    source.read(1)
    now[0] = 102.0
    # 1.5 CPU-seconds of user time over 2 s: 0.75 cores busy of the 1.5 the quota allows
    _cgroup_job(tmp_path, "42", 2_000_000, 1_500_000, 500_000, 1 << 30, (0, 0))
    (job,) = [r for r in source.read(2) if r["job_id"] == "42"]
    assert (job["cpu_cores"], job["cpu_user_pct"], job["cpu_system_pct"]) == (1.5, 50.0, 50.0 / 3)


NODE_PAGE = """# TYPE node_cpu_seconds_total counter
node_cpu_seconds_total{{cpu="0",mode="idle"}} {idle}
node_cpu_seconds_total{{cpu="0",mode="user"}} {user}
node_cpu_seconds_total{{cpu="0",mode="system"}} 10
node_cpu_seconds_total{{cpu="0",mode="iowait"}} 5
node_cpu_seconds_total{{cpu="1",mode="idle"}} {idle}
node_cpu_seconds_total{{cpu="1",mode="user"}} {user}
node_memory_MemTotal_bytes 1.6e+10
node_memory_MemAvailable_bytes 4e+09
node_network_receive_bytes_total{{device="eth0"}} {rx}
node_network_receive_bytes_total{{device="lo"}} 999999
node_network_transmit_bytes_total{{device="eth0"}} 0
node_disk_read_bytes_total{{device="nvme0n1"}} 0
node_disk_written_bytes_total{{device="nvme0n1"}} 0
node_load1 2.5
"""


def test_node_exporter_source(make_exporter: Callable[[str], Any]) -> None:
    server = make_exporter(NODE_PAGE.format(idle=100, user=50, rx=0))
    now = [0.0]
    source = NodeExporterSource(server.url, cluster="c", host="h", clock=lambda: now[0])
    first = source.read(1)[0]
    assert (first["mem_used_bytes"], first["load1"], first["cpu_cores"]) == (1.2e10, 2.5, 2.0)
    server.text = NODE_PAGE.format(idle=115, user=65, rx=2_000_000)
    now[0] = 2.0
    row = source.read(2)[0]
    # 60 CPU-seconds passed (2 cpus x (15 idle + 15 user)); user is 30 of them.
    assert (row["cpu_user_pct"], row["cpu_system_pct"], row["cpu_iowait_pct"]) == (50.0, 0.0, 0.0)
    assert row["net_rx_bytes_s"] == 1_000_000.0  # eth0 only, loopback excluded


def test_dcgm_source_errors(make_exporter: Callable[[str], Any]) -> None:
    server = make_exporter('DCGM_FI_DEV_GPU_UTIL{gpu="0"} 1\nDCGM_FI_DEV_GPU_UTIL{gpu="1" 2\n')
    with pytest.raises(MetricsParseError, match=r"^line 2: "):
        DcgmSource(server.url, cluster="c").read(0)
    server.status = 500
    with pytest.raises(SourceUnavailableError, match="HTTP 500"):
        DcgmSource(server.url, cluster="c").read(0)
    with pytest.raises(SourceUnavailableError):
        DcgmSource("http://127.0.0.1:9/metrics", cluster="c", timeout_s=1).read(0)
