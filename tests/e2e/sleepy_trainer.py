"""A real PyTorch training process whose DataLoader dominates each step (a data-loader stall).

Run by tests/e2e/test_profile_e2e.py: `python sleepy_trainer.py SECONDS`. Instrumented with
collector.sdk exactly as a user would (`sdk.instrument(loader)`); the job id and rank come from
FLEETSCOPE_JOB_ID and RANK, the agent's socket from FLEETSCOPE_AGENT_SDK_SOCKET. Each item of
the dataset sleeps, as slow decoding would, so about half of every step waits on the loader.
"""

from __future__ import annotations

import sys
import time

import torch

from collector import sdk

SLEEP_PER_ITEM_S = 0.003
BATCH = 8


class SleepyDataset(torch.utils.data.Dataset):  # type: ignore[misc]
    def __len__(self) -> int:
        return 64 * BATCH

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        time.sleep(SLEEP_PER_ITEM_S)
        return torch.randn(64), torch.tensor(index % 4)


def main(seconds: float) -> None:
    torch.manual_seed(0)
    loader = sdk.instrument(torch.utils.data.DataLoader(SleepyDataset(), batch_size=BATCH))
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 4))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for features, labels in loader:
            optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(features), labels)
            loss.backward()
            optimizer.step()
            if time.monotonic() >= deadline:
                break
    sdk.get_monitor().close()


if __name__ == "__main__":
    main(float(sys.argv[1]))
