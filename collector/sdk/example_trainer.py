"""A real PyTorch training loop on CPU, instrumented with the SDK as a user would: the demo's job.

`fleetscope demo` starts it (when torch is installed) so that a newcomer can run
`fleetscope profile --job <its job>` against a real process and see a real trace analysed. It is
also the shortest complete example of the SDK: one `sdk.instrument(loader)` line. The job id and
rank come from FLEETSCOPE_JOB_ID and RANK, the agent's socket from FLEETSCOPE_AGENT_SDK_SOCKET
(collector.sdk.monitor reads them).

Each item of the dataset sleeps a little, as slow JPEG decoding in a single-process DataLoader
would, so the trace shows a data-loader stall (trace rule T8) and the step metrics a data wait
(pipeline rule P1): the demo has something true to find. It counts one step's FLOPs with torch's
flop counter (collector.sdk.flops) and reports them (`sdk.report_flops`, fp32: it trains in
fp32), so its job has a measured MFU: tiny, as a small MLP on the simulated H100 the demo shows
it on must be. Runs until SIGTERM or Ctrl-C, or for
`--seconds`. torch is imported inside `main`, so importing this module costs nothing.

    python -m collector.sdk.example_trainer [--seconds S]
"""

from __future__ import annotations

import argparse
import math
import signal
import time
from typing import Any

DECODE_S_PER_ITEM = 0.004  # slow decoding: about half of every step waits on the loader
BATCH = 16
FEATURES = 128
CLASSES = 10


def _stop_on_sigterm() -> None:
    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--seconds", type=float, default=0.0, help="0: until SIGTERM")
    args = parser.parse_args(argv)
    _stop_on_sigterm()

    import torch

    from collector import sdk

    class SlowDecodeDataset(torch.utils.data.Dataset[tuple[Any, Any]]):
        def __len__(self) -> int:
            return 64 * BATCH

        def __getitem__(self, index: int) -> tuple[Any, Any]:
            time.sleep(DECODE_S_PER_ITEM)
            return torch.randn(FEATURES), torch.tensor(index % CLASSES)

    torch.manual_seed(0)
    torch.set_num_threads(1)  # the demo shares the machine with a simulated fleet
    loader = sdk.instrument(
        torch.utils.data.DataLoader(SlowDecodeDataset(), batch_size=BATCH, shuffle=True)
    )
    model = torch.nn.Sequential(
        torch.nn.Linear(FEATURES, 256), torch.nn.ReLU(), torch.nn.Linear(256, CLASSES)
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

    def train_step(features: Any, labels: Any) -> None:
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(features), labels)
        loss.backward()  # type: ignore[no-untyped-call]
        optimizer.step()

    from collector.sdk.flops import step_flops

    # the shapes decide the count: one step on a batch of the loader's shape
    sample = (torch.randn(BATCH, FEATURES), torch.randint(0, CLASSES, (BATCH,)))
    sdk.report_flops(step_flops(lambda: train_step(*sample)), "fp32")
    deadline = time.monotonic() + args.seconds if args.seconds > 0 else math.inf
    try:
        while time.monotonic() < deadline:
            for features, labels in loader:
                train_step(features, labels)
                if time.monotonic() >= deadline:
                    break
    except KeyboardInterrupt:
        pass
    finally:
        sdk.get_monitor().close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
