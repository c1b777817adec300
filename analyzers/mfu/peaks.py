"""Peak dense FLOPS per GPU model and dtype: the denominator of MFU.

Dense, never the "with sparsity" figures NVIDIA's datasheets print first (2:4 structured sparsity
doubles them; a dense training step cannot reach them, and MFU as PaLM (Chowdhery et al. 2022,
appendix B) and Llama 3 (Dubey et al. 2024, section 3.3.2) report it is over the dense peak). Each
row cites the vendor datasheet it comes from; where a datasheet prints only the sparse figure,
the dense one is half of it, as its footnote says.

- H100 SXM5 and H200 SXM: NVIDIA H100 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/
  h100, "H100 SXM" column: BF16/FP16 1,979 TFLOPS*, TF32 989 TFLOPS*, FP8 3,958 TFLOPS*,
  FP32 67 TFLOPS; * with sparsity) and the NVIDIA H200 datasheet (the same compute figures).
- H100 PCIe: the same datasheet, "H100 PCIe" column (BF16 1,513*, TF32 756*, FP8 3,026*, FP32 51);
  H100 NVL: its "H100 NVL" column (BF16 1,671*, TF32 835*, FP8 3,341*, FP32 60).
- A100 (SXM4 and PCIe, 40 and 80 GB): NVIDIA A100 Tensor Core GPU datasheet (BF16/FP16 312,
  TF32 156, FP32 19.5 TFLOPS dense; 624/312 with sparsity).
- V100 SXM2 / PCIe: NVIDIA Tesla V100 datasheet (tensor FP16 125 / 112, FP32 15.7 / 14 TFLOPS).
- L40S: NVIDIA L40S datasheet (BF16/FP16 tensor 362.05 dense, 733* sparse; TF32 183 / 366*;
  FP8 733 / 1,466*; FP32 91.6 TFLOPS).

A model this table does not know has no measured MFU (never a guessed peak).
"""

from __future__ import annotations

from typing import Final

TFLOPS: Final = 1e12

# (substrings of the exporter's modelName, all of which must appear, case-insensitive) ->
# dtype -> dense peak in TFLOPS. More specific rows first: "H100 PCIe" before "H100".
PEAKS_TFLOPS: Final[tuple[tuple[tuple[str, ...], dict[str, float]], ...]] = (
    (("h100", "nvl"), {"bf16": 835.5, "fp16": 835.5, "tf32": 417.5, "fp8": 1670.5, "fp32": 60.0}),
    (("h100", "pcie"), {"bf16": 756.5, "fp16": 756.5, "tf32": 378.0, "fp8": 1513.0, "fp32": 51.0}),
    (("h100",), {"bf16": 989.5, "fp16": 989.5, "tf32": 494.5, "fp8": 1979.0, "fp32": 67.0}),
    (("h200",), {"bf16": 989.5, "fp16": 989.5, "tf32": 494.5, "fp8": 1979.0, "fp32": 67.0}),
    (("a100",), {"bf16": 312.0, "fp16": 312.0, "tf32": 156.0, "fp32": 19.5}),
    (("v100", "pcie"), {"fp16": 112.0, "fp32": 14.0}),
    (("v100",), {"fp16": 125.0, "fp32": 15.7}),
    (("l40s",), {"bf16": 362.05, "fp16": 362.05, "tf32": 183.0, "fp8": 733.0, "fp32": 91.6}),
)


def peak_flops(gpu_model: str | None, dtype: str) -> float | None:
    """Dense peak FLOP/s of one GPU of `gpu_model` in `dtype` (bf16, fp16, tf32, fp8, fp32), or
    None where the table has no such row."""
    if not gpu_model:
        return None
    name = gpu_model.casefold()
    for needles, peaks in PEAKS_TFLOPS:
        if all(n in name for n in needles):
            tflops = peaks.get(dtype.casefold())
            return None if tflops is None else tflops * TFLOPS
    return None
