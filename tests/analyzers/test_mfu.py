"""MFU (analyzers.mfu): the FLOP count of a real PyTorch training step on CPU equals the hand
count of a linear stack within 1 %, by the SDK's counter (collector.sdk.flops) and by the
profiler's `with_flops=True`; measured MFU over the datasheet peak; the DCGM proxy labelled."""

from __future__ import annotations

from itertools import pairwise

import pytest

from analyzers.mfu.mfu import measured_mfu, proxy_mfu
from analyzers.mfu.peaks import peak_flops

pytestmark = pytest.mark.real_component("torch")

BATCH = 64
WIDTHS = (512, 1024, 1024, 256)  # three Linear layers: 512->1024->1024->256


def hand_count() -> int:
    """One SGD step of the stack: forward 2·B·in·out per layer (a matmul's multiply-adds, bias
    adds not counted), backward the same for the weight gradient of every layer and for the
    input gradient of every layer but the first (the batch needs no gradient)."""
    layers = list(pairwise(WIDTHS))
    forward = sum(2 * BATCH * i * o for i, o in layers)
    weight_grads = forward
    input_grads = sum(2 * BATCH * i * o for i, o in layers[1:])
    return forward + weight_grads + input_grads


def training_step():  # type: ignore[no-untyped-def]
    torch = pytest.importorskip("torch", reason="the FLOP count is real PyTorch's")
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(WIDTHS[0], WIDTHS[1]),
        torch.nn.ReLU(),
        torch.nn.Linear(WIDTHS[1], WIDTHS[2]),
        torch.nn.ReLU(),
        torch.nn.Linear(WIDTHS[2], WIDTHS[3]),
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    batch, target = torch.randn(BATCH, WIDTHS[0]), torch.randn(BATCH, WIDTHS[-1])

    def step() -> None:
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(model(batch), target).backward()
        optimizer.step()

    return torch, step


def test_the_sdk_counts_a_linear_stacks_flops_as_the_hand_count() -> None:
    from collector.sdk.flops import step_flops

    _, step = training_step()
    assert step_flops(step) == pytest.approx(hand_count(), rel=0.01)


def test_the_profiler_with_flops_agrees_with_the_hand_count() -> None:
    torch, step = training_step()
    with torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU], with_flops=True
    ) as prof:
        step()
    counted = sum(event.flops for event in prof.key_averages() if event.flops)
    assert counted == pytest.approx(hand_count(), rel=0.01)


def test_measured_mfu_is_achieved_flops_over_the_dense_datasheet_peak() -> None:
    h100 = "NVIDIA H100 80GB HBM3"
    assert peak_flops(h100, "bf16") == 989.5e12  # 1,979 TFLOPS with sparsity, halved
    assert peak_flops("NVIDIA H100 PCIe", "bf16") == 756.5e12
    assert peak_flops("NVIDIA A100-SXM4-80GB", "tf32") == 156e12
    assert peak_flops("NVIDIA B200", "bf16") is None  # not in the table: no guessed peak
    # 6 x 7e9 parameters x 4096 tokens per step ~ 1.72e14 FLOPs; 2 steps/s on 8 GPUs
    mfu = measured_mfu(1.72e14, 2.0, 8, h100, "bf16")
    assert mfu is not None and mfu.kind == "measured" and mfu.label == "MFU"
    assert mfu.value == pytest.approx(1.72e14 * 2 / (8 * 989.5e12))
    assert measured_mfu(1.72e14, 2.0, 8, "NVIDIA B200", "bf16") is None


def test_the_dcgm_proxy_is_labelled_and_never_called_mfu() -> None:
    proxy = proxy_mfu(0.4)
    assert proxy is not None and proxy.kind == "proxy"
    assert proxy.label == "tensor-pipe active (MFU proxy, DCGM)"
    assert proxy_mfu(None) is None
