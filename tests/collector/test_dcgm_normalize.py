"""Every shared dcgm-exporter variant becomes exactly the expected gpu_samples rows."""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa
import pytest

from collector.batcher import rows_to_ipc
from fleetscope.attribution.labels import HpcJobLabel, PodLabels
from fleetscope.attribution.resolver import AttributionResolver
from fleetscope.contract import GPU_SAMPLES, from_ipc
from fleetscope.dcgm_fields import is_blank
from fleetscope.exposition import parse
from fleetscope.normalize import GpuReading, normalize_samples

TS = 1_700_000_000_000


def rows_of(text: str, host: str | None = None) -> list[GpuReading]:
    readings = normalize_samples(parse(text).samples, ts_ms=TS, cluster="c1", host=host)
    AttributionResolver([HpcJobLabel(), PodLabels()]).resolve(readings)
    return readings


def full(**columns: object) -> dict[str, object]:
    """A complete row: every contract column, None unless given."""
    unknown = set(columns) - set(GPU_SAMPLES.names)
    assert not unknown, unknown
    return {name: columns.get(name) for name in GPU_SAMPLES.names}


def as_full(reading: GpuReading) -> dict[str, object]:
    return {name: reading.row.get(name) for name in GPU_SAMPLES.names}


UUID = "GPU-5f1c2a7e-8b3d-4c11-9e2a-00000000000"
ENERGY = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"


def test_v100_legacy_lowercase_uuid_old_pod_labels_and_blank_sentinels(
    page: Callable[[str], str],
) -> None:
    readings = rows_of(page("v100_legacy"))
    assert [r.row["gpu_index"] for r in readings] == [0, 1, 2, 3]
    # GPU 3 printed 9223372036854775794 (DCGM_INT64_BLANK + 2) for every profiling field.
    assert as_full(readings[3]) == full(
        ts=TS, cluster="c1", host="dcgm-exporter-x7k2p", gpu_index=3, gpu_uuid=UUID + "3",
        gpu_model="Tesla V100-SXM2-32GB", sm_clock_mhz=1980.0, mem_clock_mhz=2619.0,
        temp_c=43.0, power_w=218.408158, gpu_util=69.0, mem_copy_util=37.0,
        fb_free_mib=49990.0, fb_used_mib=31569.0, xid_last=0.0, pcie_replay_total=0.0,
        extra={ENERGY: 912345678904.0},
    )  # fmt: skip
    # Empty container_name / pod_name / pod_namespace mean "no pod", not an empty-named pod.
    assert all(r.row["job_id"] is None and r.row["pod"] is None for r in readings)
    assert readings[0].row["sm_active"] is not None


def test_a100_mig_instances_are_rows_and_gpu_util_comes_from_gr_engine_active(
    page: Callable[[str], str],
) -> None:
    readings = rows_of(page("a100_mig"))
    keys = [(r.row["gpu_index"], r.row["mig_profile"], r.row["mig_instance_id"]) for r in readings]
    assert keys == [(0, "3g.40gb", 1), (0, "4g.40gb", 2), (1, "3g.40gb", 1), (1, "4g.40gb", 2)]
    assert as_full(readings[3]) == full(
        ts=TS, cluster="c1", host="gpu-node-07", gpu_index=1, gpu_uuid=UUID + "1",
        gpu_model="NVIDIA A100 80GB PCIe", mig_profile="4g.40gb", mig_instance_id=2,
        sm_clock_mhz=1980.0, mem_clock_mhz=2619.0, temp_c=41.0, power_w=218.408158,
        mem_copy_util=7.0, fb_free_mib=49992.0, fb_used_mib=31567.0, xid_last=0.0,
        pcie_replay_total=0.0, gr_engine_active=0.574424, sm_active=0.287938,
        sm_occupancy=0.757141, tensor_active=0.668216, dram_active=0.313748,
        pcie_tx_bytes_s=9124650420.69696, pcie_rx_bytes_s=13283379957.288015,
        gpu_util=0.574424 * 100.0, extra={ENERGY: 912345678902.0},
    )  # fmt: skip


def test_h100_k8s_pod_labels_name_the_job(page: Callable[[str], str]) -> None:
    readings = rows_of(page("h100_k8s_release"))
    assert [r.row["job_id"] for r in readings] == ["ml-team-a/llama-ft-0-worker"] * 4 + [
        "ml-team-a/llama-ft-1-worker"
    ] * 4
    assert as_full(readings[4]) == full(
        ts=TS, cluster="c1", host="gpu-node-01", gpu_index=4, gpu_uuid=UUID + "4",
        gpu_model="NVIDIA H100 80GB HBM3", job_id="ml-team-a/llama-ft-1-worker",
        attribution="k8s", pod="llama-ft-1-worker", namespace="ml-team-a", container="trainer",
        sm_clock_mhz=1980.0, mem_clock_mhz=2619.0, temp_c=44.0, power_w=196.480037,
        gpu_util=43.0, mem_copy_util=42.0, fb_free_mib=49989.0, fb_used_mib=31570.0,
        xid_last=0.0, pcie_replay_total=0.0, gr_engine_active=0.231957, sm_active=0.566341,
        sm_occupancy=0.779969, tensor_active=0.067348, dram_active=0.36361,
        pcie_tx_bytes_s=2457721773.013136, pcie_rx_bytes_s=5295873077.451884,
        extra={ENERGY: 912345678905.0},
    )  # fmt: skip


def test_h100_slurm_lowercase_hostname_and_hpc_job(page: Callable[[str], str]) -> None:
    readings = rows_of(page("h100_slurm_main"))
    assert [r.row["job_id"] for r in readings] == ["918273"] * 4 + ["918274"] * 4
    assert {r.row["attribution"] for r in readings} == {"hpc_job"}
    assert as_full(readings[7]) == full(
        ts=TS, cluster="c1", host="dgx-b7", gpu_index=7, gpu_uuid=UUID + "7",
        gpu_model="NVIDIA H100 80GB HBM3", job_id="918274", attribution="hpc_job",
        sm_clock_mhz=1980.0, mem_clock_mhz=2619.0, temp_c=47.0, power_w=429.908342,
        gpu_util=15.0, mem_copy_util=21.0, fb_free_mib=49986.0, fb_used_mib=31573.0,
        xid_last=0.0, pcie_replay_total=0.0, gr_engine_active=0.589124, sm_active=0.515491,
        sm_occupancy=0.392379, tensor_active=0.340054, dram_active=0.614069,
        pcie_tx_bytes_s=9320323193.739515, pcie_rx_bytes_s=462891325.183918,
        extra={ENERGY: 912345678908.0},
    )  # fmt: skip


def test_the_agent_host_setting_beats_the_exporter_pod_name(page: Callable[[str], str]) -> None:
    readings = rows_of(page("v100_legacy"), host="node-17")
    assert {r.row["host"] for r in readings} == {"node-17"}


def test_renamed_dcgm4_fields_land_in_the_same_columns() -> None:
    text = (
        'DCGM_FI_PROF_SM_UTIL_RATIO{gpu="0",UUID="GPU-a"} 0.5\n'
        'DCGM_FI_PROF_SM_OCCUPANCY_RATIO{gpu="0",UUID="GPU-a"} 0.25\n'
        'DCGM_FI_PROF_TENSOR_UTIL_RATIO{gpu="0",UUID="GPU-a"} 0.125\n'
        'DCGM_FI_PROF_DRAM_UTIL_RATIO{gpu="0",UUID="GPU-a"} 0.75\n'
        'DCGM_FI_PROF_GR_ENGINE_UTIL_RATIO{gpu="0",UUID="GPU-a"} 0.875\n'
        'DCGM_FI_PROF_FP16_UTIL_RATIO{gpu="0",UUID="GPU-a"} 0.0625\n'
        'DCGM_FI_DEV_GPU_UTIL_RATIO{gpu="0",UUID="GPU-a"} 93\n'
        'DCGM_FI_DEV_XID_ERROR{gpu="0",UUID="GPU-a"} 79\n'
        'DCGM_FI_DEV_FB_USED_RATIO{gpu="0",UUID="GPU-a"} 0.5\n'
    )
    (reading,) = rows_of(text, host="h")
    row = reading.row
    assert (row["sm_active"], row["sm_occupancy"], row["tensor_active"]) == (0.5, 0.25, 0.125)
    assert (row["dram_active"], row["gr_engine_active"], row["fp16_active"]) == (
        0.75,
        0.875,
        0.0625,
    )
    assert (row["gpu_util"], row["xid_last"]) == (93.0, 79.0)
    assert row["extra"] == {"DCGM_FI_DEV_FB_USED_RATIO": 0.5}  # unknown fields are kept


def test_exporter_timestamps_win_over_scrape_time() -> None:
    (reading,) = rows_of('DCGM_FI_DEV_GPU_UTIL{gpu="2"} 7 1700000123456\n', host="h")
    assert reading.row["ts"] == 1_700_000_123_456


@pytest.mark.parametrize(
    ("value", "blank"),
    [
        (float(0x7FFFFFFFFFFFFFF0), True),
        (9223372036854775794.0, True),
        (140737488355328.0, True),
        (140737488355331.0, True),
        (float("nan"), True),
        (140737488355332.0, False),
        (912345678901.0, False),
        (0.0, False),
    ],
)
def test_blank_sentinels(value: float, blank: bool) -> None:
    assert is_blank(value) is blank


@pytest.mark.parametrize(
    "variant", ["a100_mig", "h100_k8s_release", "h100_slurm_main", "v100_legacy"]
)
def test_rows_fit_the_contract_through_arrow_ipc(variant: str, page: Callable[[str], str]) -> None:
    readings = rows_of(page(variant))
    table = from_ipc(rows_to_ipc("gpu_samples", [r.row for r in readings]))
    assert table.schema == GPU_SAMPLES
    assert table.num_rows == len(readings)
    assert table.column("extra")[0].as_py() == [(ENERGY, 912345678901.0)]
    assert table.column("ts")[0].as_py().timestamp() == TS / 1000
    assert pa.compute.sum(table.column("gpu_index")).as_py() == sum(
        r.row["gpu_index"] for r in readings
    )
