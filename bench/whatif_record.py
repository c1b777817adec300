"""Record the what-if validation pairs with `torch.profiler` on the CPU.

    python -m bench.whatif_record OUT_DIR [--steps 5]

One small convolutional network, one synthetic data set whose items cost real CPU work (a
decode-like transform), and four variants that each change one thing the what-if models:
`base` (fp32, 0 DataLoader workers, pageable batches), `workers4` (4 workers), `amp` (bf16
autocast on the CPU) and `pinned` (`pin_memory=True`; on a machine without an accelerator
PyTorch pins nothing, so the pair checks that the model predicts no change when there are no
host-to-device copies). Each variant writes one Kineto trace, `OUT_DIR/<variant>/trace.json.gz`,
of `--steps` ProfilerStep ranges after one wait and two warm-up steps. The traces are small
(a few hundred KiB) so they can live in tests/data.
"""

from __future__ import annotations

import argparse
import gzip
import shutil
import sys
import warnings
from pathlib import Path

VARIANTS = {
    "base": {"workers": 0, "amp": False, "pin": False},
    "workers4": {"workers": 4, "amp": False, "pin": False},
    "amp": {"workers": 0, "amp": True, "pin": False},
    "pinned": {"workers": 0, "amp": False, "pin": True},
}


def record(out: Path, variant: str, steps: int) -> Path:
    """Record one variant; PyTorch's warnings about what the variant does on purpose (more
    workers than cores, pin_memory without an accelerator) are expected and silenced."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*pin_memory.*", category=UserWarning)
        warnings.filterwarnings("ignore", message=".*worker processes.*", category=UserWarning)
        return _record(out, variant, steps)


def _record(out: Path, variant: str, steps: int) -> Path:
    import torch
    from torch import nn
    from torch.profiler import ProfilerActivity, profile, schedule
    from torch.utils.data import DataLoader, Dataset

    cfg = VARIANTS[variant]

    class Images(Dataset[tuple[torch.Tensor, torch.Tensor]]):
        """Items cost CPU like a JPEG decode + augment: a resize and a blur per image."""

        def __len__(self) -> int:
            return 10_000

        def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
            g = torch.Generator().manual_seed(i)
            raw = torch.rand(3, 160, 160, generator=g)
            img = torch.nn.functional.interpolate(raw[None], size=(64, 64), mode="bilinear")[0]
            for _ in range(4):
                img = torch.nn.functional.avg_pool2d(img[None], 3, 1, 1)[0]
            return img, torch.tensor(i % 10)

    torch.manual_seed(0)
    torch.set_num_threads(1)  # one training thread: the pair differs in one thing, not in threads
    model = nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(64, 64, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        nn.Linear(64, 10),
    )  # fmt: skip
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loader = DataLoader(
        Images(), batch_size=16, num_workers=cfg["workers"], pin_memory=bool(cfg["pin"])
    )
    target = out / variant
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    raw_path = target / "trace.json"
    with profile(
        activities=[ProfilerActivity.CPU],
        schedule=schedule(wait=1, warmup=2, active=steps, repeat=1),
        on_trace_ready=lambda p: p.export_chrome_trace(str(raw_path)),
    ) as prof:
        for n, (x, y) in enumerate(loader):
            if n >= 1 + 2 + steps:
                break
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bool(cfg["amp"])):
                loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            prof.step()
    gz = target / "trace.json.gz"
    with raw_path.open("rb") as src, gzip.open(gz, "wb", compresslevel=9) as dst:
        shutil.copyfileobj(src, dst)
    raw_path.unlink()
    return gz


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.whatif_record")
    parser.add_argument("out", type=Path)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--variants", nargs="*", default=list(VARIANTS))
    parser.add_argument(
        "--rounds", type=int, default=1, help="record every variant this many times, interleaved"
    )
    args = parser.parse_args(argv)
    for n in range(args.rounds):
        out = args.out if args.rounds == 1 else args.out / f"round{n}"
        for variant in args.variants:
            path = record(out, variant, args.steps)
            print(f"{variant}: {path} ({path.stat().st_size} bytes)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
