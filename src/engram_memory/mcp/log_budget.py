"""A budget for log lines that a client can cause: a flood of garbage must not fill the host's disk.

Each kind of event (a malformed line, a connection dropped for a timeout) may write `burst` lines per
window; beyond that it is counted, and the next line the budget allows says how many were left out.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

__all__ = ["LogBudget"]


class LogBudget:
    def __init__(
        self,
        logger: logging.Logger,
        *,
        burst: int = 10,
        window_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._logger = logger
        self._burst = burst
        self._window_s = window_s
        self._clock = clock
        self._lock = threading.Lock()
        self._window_start = clock()
        self._written = 0
        self._left_out = 0

    def warning(self, message: str, *args: object) -> bool:
        """Logs `message` when the budget allows; True when it was written."""
        with self._lock:
            now = self._clock()
            if now - self._window_start >= self._window_s:
                self._window_start, self._written = now, 0
            if self._written >= self._burst:
                self._left_out += 1
                return False
            self._written += 1
            left_out, self._left_out = self._left_out, 0
        if left_out:
            self._logger.warning(message + " (and %d more like it not logged)", *args, left_out)
        else:
            self._logger.warning(message, *args)
        return True
