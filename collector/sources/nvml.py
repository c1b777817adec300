"""NVML source, for hosts where no dcgm-exporter runs: one gpu_samples row per GPU.

The NVML library object is injected (`pynvml` from nvidia-ml-py in production, a fake with the same
function names in tests), so this module is exercised here without a GPU and on a real one when
available. Units, from the NVML API reference: utilization rates are percent; memory info is
bytes (we write MiB); power usage is milliwatts (we write W); clocks MHz; temperature C; PCIe
throughput KB/s (we write bytes/s); violation status times are ns (we write us); the XID comes from
an NVML event set registered for nvmlEventTypeXidCriticalError.

What NVML cannot give: the DCP profiling ratios (sm_active, tensor_active...) need DCGM; those
columns stay null. MIG instances are reported as their parent GPU.

Must never: let one unsupported query (NVMLError_NotSupported on older boards) fail the whole
reading; that field is null instead.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable
from typing import Any

from fleetscope.errors import SourceUnavailableError
from fleetscope.normalize import GpuReading

log = logging.getLogger(__name__)

_MIB = 1024.0 * 1024.0


class NvmlSource:
    def __init__(self, nvml: Any, *, cluster: str, host: str | None = None) -> None:
        self.nvml = nvml
        self.cluster = cluster
        self.host = host or socket.gethostname()
        self._events: Any = None
        self._last_xid: dict[int, float] = {}
        self.pids: dict[int, list[str]] = {}  # pid -> GPU UUIDs, for proc attribution
        try:
            nvml.nvmlInit()
        except nvml.NVMLError as exc:
            raise SourceUnavailableError(f"NVML: {exc}") from exc
        self._count = nvml.nvmlDeviceGetCount()
        self._handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(self._count)]
        self._register_xid_events()

    def _try(self, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return fn(*args)
        except self.nvml.NVMLError:
            return None

    def _register_xid_events(self) -> None:
        nvml = self.nvml
        try:
            self._events = nvml.nvmlEventSetCreate()
            for handle in self._handles:
                nvml.nvmlDeviceRegisterEvents(
                    handle, nvml.nvmlEventTypeXidCriticalError, self._events
                )
        except nvml.NVMLError as exc:  # not supported (e.g. some vGPU guests): no XIDs then
            log.info("NVML XID events unavailable: %s", exc)
            self._events = None

    def _drain_xids(self) -> None:
        if self._events is None:
            return
        nvml = self.nvml
        index_of = {id(h): i for i, h in enumerate(self._handles)}
        while True:
            try:
                event = nvml.nvmlEventSetWait_v2(self._events, 0)
            except nvml.NVMLError:  # NVMLError_Timeout: no more events
                return
            index = index_of.get(id(event.device))
            if index is None:
                index = self._try(nvml.nvmlDeviceGetIndex, event.device)
            if index is not None:
                self._last_xid[int(index)] = float(event.eventData)

    def read(self, ts_ms: int) -> list[GpuReading]:
        nvml = self.nvml
        self._drain_xids()
        readings: list[GpuReading] = []
        pids: dict[int, list[str]] = {}
        for index, handle in enumerate(self._handles):
            uuid = self._try(nvml.nvmlDeviceGetUUID, handle)
            util = self._try(nvml.nvmlDeviceGetUtilizationRates, handle)
            mem = self._try(nvml.nvmlDeviceGetMemoryInfo, handle)
            power_mw = self._try(nvml.nvmlDeviceGetPowerUsage, handle)
            reasons = self._try(nvml.nvmlDeviceGetCurrentClocksEventReasons, handle)
            ecc = self._try(
                nvml.nvmlDeviceGetTotalEccErrors,
                handle,
                nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
                nvml.NVML_VOLATILE_ECC,
            )
            tx_kb = self._try(
                nvml.nvmlDeviceGetPcieThroughput, handle, nvml.NVML_PCIE_UTIL_TX_BYTES
            )
            rx_kb = self._try(
                nvml.nvmlDeviceGetPcieThroughput, handle, nvml.NVML_PCIE_UTIL_RX_BYTES
            )
            power_v = self._try(
                nvml.nvmlDeviceGetViolationStatus, handle, nvml.NVML_PERF_POLICY_POWER
            )
            thermal_v = self._try(
                nvml.nvmlDeviceGetViolationStatus, handle, nvml.NVML_PERF_POLICY_THERMAL
            )
            procs = self._try(nvml.nvmlDeviceGetComputeRunningProcesses, handle) or []
            row: dict[str, object] = {
                "ts": ts_ms,
                "cluster": self.cluster,
                "host": self.host,
                "gpu_index": index,
                "gpu_uuid": uuid,
                "gpu_model": self._try(nvml.nvmlDeviceGetName, handle),
                "mig_profile": None,
                "mig_instance_id": None,
                "job_id": None,
                "attribution": None,
                "pod": None,
                "namespace": None,
                "container": None,
                "gpu_util": _f(util.gpu) if util is not None else None,
                "mem_copy_util": _f(util.memory) if util is not None else None,
                "fb_used_mib": mem.used / _MIB if mem is not None else None,
                "fb_free_mib": mem.free / _MIB if mem is not None else None,
                "power_w": power_mw / 1000.0 if power_mw is not None else None,
                "temp_c": _f(
                    self._try(nvml.nvmlDeviceGetTemperature, handle, nvml.NVML_TEMPERATURE_GPU)
                ),
                "sm_clock_mhz": _f(
                    self._try(nvml.nvmlDeviceGetClockInfo, handle, nvml.NVML_CLOCK_SM)
                ),
                "mem_clock_mhz": _f(
                    self._try(nvml.nvmlDeviceGetClockInfo, handle, nvml.NVML_CLOCK_MEM)
                ),
                "pcie_tx_bytes_s": tx_kb * 1024.0 if tx_kb is not None else None,
                "pcie_rx_bytes_s": rx_kb * 1024.0 if rx_kb is not None else None,
                "xid_last": self._last_xid.get(index, 0.0) if self._events is not None else None,
                "ecc_dbe_total": _f(ecc),
                "pcie_replay_total": _f(self._try(nvml.nvmlDeviceGetPcieReplayCounter, handle)),
                "power_violation_us": power_v.violationTime / 1000.0 if power_v else None,
                "thermal_violation_us": thermal_v.violationTime / 1000.0 if thermal_v else None,
                "clocks_event_reasons": _f(reasons),
            }
            extra: dict[str, float] = {"processes": float(len(procs))}
            for proc in procs:
                used = getattr(proc, "usedGpuMemory", None)
                if used is not None:
                    extra[f"process_fb_used_mib:{proc.pid}"] = used / _MIB
                if uuid:
                    pids.setdefault(int(proc.pid), []).append(str(uuid))
            row["extra"] = extra
            readings.append(GpuReading(row=row, labels={"gpu": str(index)}, extra=extra))
        self.pids = pids
        return readings

    def pid_gpus(self) -> dict[int, list[str]]:
        """pid -> UUIDs of the GPUs it runs on, from the last read (for ProcEnviron)."""
        return self.pids

    def close(self) -> None:
        nvml = self.nvml
        if self._events is not None:
            self._try(nvml.nvmlEventSetFree, self._events)
        self._try(nvml.nvmlShutdown)


def _f(value: Any) -> float | None:
    return None if value is None else float(value)
