"""The one protocol every attribution source follows.

Must never: do I/O in `job_for`; sources read their files or /proc in `refresh`, once per scrape.
"""

from __future__ import annotations

from typing import Protocol

from fleetscope.normalize import GpuReading


class AttributionSource(Protocol):
    """Names the job that owns a GPU, or None when this source does not know."""

    name: str  # written to gpu_samples.attribution for rows this source attributed

    def refresh(self) -> None:
        """Re-read whatever the source reads (files, /proc); called once per scrape."""

    def job_for(self, reading: GpuReading) -> str | None:
        """The job owning this GPU (or MIG instance), or None."""


def gpu_keys(reading: GpuReading) -> tuple[str, ...]:
    """The names a file or table may use for this GPU, most specific first.

    A MIG instance is `<uuid>:<GPU_I_ID>` or `<index>:<GPU_I_ID>` before its parent GPU's UUID and
    index, so a per-instance entry beats a whole-GPU one.
    """
    row = reading.row
    index = str(row["gpu_index"])
    uuid = row.get("gpu_uuid")
    mig = row.get("mig_instance_id")
    keys: list[str] = []
    if mig is not None:
        if uuid:
            keys.append(f"{uuid}:{mig}")
        keys.append(f"{index}:{mig}")
    if uuid:
        keys.append(str(uuid))
    keys.append(index)
    return tuple(keys)
