"""MIG profiles per GPU model, from NVIDIA's MIG user guide ("Supported MIG Profiles"): each
profile's fraction of the GPU's SMs (sevenths) and memory (eighths), and how many instances of
it one GPU holds. Profile names carry the memory of that product (A100-40GB 1g.5gb is the
A100-80GB's 1g.10gb: the same eighth).

Placement: a set of instances fits one GPU when their SM sevenths sum to at most 7, their
memory eighths to at most 8, and no profile exceeds its instance count. The guide's placement
diagram is stricter for a few mixes (a 4g takes slots 0-3, so 4g + 3g fits but not 4g + 4g);
the instance counts above already exclude those (a 4g profile has one instance per GPU).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["MIG_MODELS", "MigProfile", "mig_profiles"]


@dataclass(frozen=True)
class MigProfile:
    name: str
    sm_sevenths: int
    memory_eighths: int
    max_instances: int
    memory_gib: float

    @property
    def sm_fraction(self) -> float:
        return self.sm_sevenths / 7.0


# (size suffix per eighths 1, 2, 4, 8) per product, from the guide's tables.
_SIZES = {
    "A100-40GB": ("5gb", "10gb", "20gb", "40gb", 40.0),
    "A100-80GB": ("10gb", "20gb", "40gb", "80gb", 80.0),
    "H100-80GB": ("10gb", "20gb", "40gb", "80gb", 80.0),
    "H100-94GB": ("12gb", "24gb", "47gb", "94gb", 94.0),
    "H200-141GB": ("18gb", "35gb", "71gb", "141gb", 141.0),
}
# (compute g, memory eighths, instances per GPU), the same on A100, H100 and H200.
_SHAPES = ((1, 1, 7), (1, 2, 4), (2, 2, 3), (3, 4, 2), (4, 4, 1), (7, 8, 1))

MIG_MODELS: dict[str, tuple[MigProfile, ...]] = {}
for _product, (_e1, _e2, _e4, _e8, _gib) in _SIZES.items():
    _suffix = {1: _e1, 2: _e2, 4: _e4, 8: _e8}
    MIG_MODELS[_product] = tuple(
        MigProfile(f"{g}g.{_suffix[m]}", g, m, n, _gib * m / 8) for g, m, n in _SHAPES
    )


def product_of(gpu_model: str | None, fb_total_mib: float | None) -> str | None:
    """The MIG product of a DCGM model name (and its memory, which tells 40 from 80 GB), or
    None when the model has no MIG (V100, L4, consumer parts...)."""
    name = (gpu_model or "").upper()
    gib = (fb_total_mib or 0.0) / 1024.0
    if "A100" in name:
        return "A100-80GB" if gib > 48 or "80GB" in name else "A100-40GB"
    if "H200" in name:
        return "H200-141GB"
    if "H100" in name:
        return "H100-94GB" if gib > 88 or "NVL" in name else "H100-80GB"
    return None


def mig_profiles(gpu_model: str | None, fb_total_mib: float | None) -> tuple[MigProfile, ...]:
    product = product_of(gpu_model, fb_total_mib)
    return MIG_MODELS[product] if product else ()


def smallest_profile(
    profiles: tuple[MigProfile, ...], sm_fraction: float, memory_gib: float
) -> MigProfile | None:
    """The smallest profile with at least `sm_fraction` of the GPU's SMs and `memory_gib`."""
    fitting = [
        p for p in profiles if p.sm_fraction >= sm_fraction - 1e-9 and p.memory_gib >= memory_gib
    ]
    return min(fitting, key=lambda p: (p.sm_sevenths, p.memory_eighths)) if fitting else None
