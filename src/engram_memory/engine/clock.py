"""Wall-clock time in epoch milliseconds, behind a port so time-bound rules can be tested honestly."""

from __future__ import annotations

import time


class SystemClock:
    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000
