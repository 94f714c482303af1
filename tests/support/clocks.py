"""A clock the test moves by hand: time-bound rules (TTLs, windows, expiry) without sleeping.

Injected through the engine's Clock port, exactly where the system clock goes in production.
"""

from __future__ import annotations

import time


class ManualClock:
    def __init__(self, start_ms: int | None = None) -> None:
        self.now = time.time_ns() // 1_000_000 if start_ms is None else start_ms
        self.step_ms = 0

    def now_ms(self) -> int:
        current = self.now
        self.now += self.step_ms
        return current

    def advance(self, ms: int) -> None:
        self.now += ms
