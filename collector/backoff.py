"""Exponential backoff with full jitter, for retries against ingest.

delay(n) = uniform(0, min(cap_s, base_s * 2**n)): "full jitter" from the AWS Architecture Blog,
"Exponential Backoff And Jitter" (Marc Brooker, 2015), which showed it spreads a fleet's retries
best (10,000 agents must not hammer a recovering ingest in lockstep). Random source injected.

Must never: sleep itself (callers wait, so a stop signal can cut the wait short).
"""

from __future__ import annotations

import random


class Backoff:
    def __init__(
        self, *, base_s: float = 0.5, cap_s: float = 60.0, rng: random.Random | None = None
    ) -> None:
        self.base_s = base_s
        self.cap_s = cap_s
        self.attempt = 0
        self._rng = rng or random.Random()

    def next_delay(self) -> float:
        ceiling = min(self.cap_s, self.base_s * (2 ** min(self.attempt, 32)))
        self.attempt += 1
        return self._rng.uniform(0.0, ceiling)

    def reset(self) -> None:
        self.attempt = 0
