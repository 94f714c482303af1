"""A budget for log lines that a client can cause: a flood of garbage must not fill the host's disk.

Each kind of event (a malformed line, a connection dropped for a timeout) may write `burst` lines per
window; beyond that it is counted, and the next line the budget allows says how many were left out.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

__all__ = ["BudgetFilter", "LogBudget", "OneLineFor"]


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

    def take(self) -> int | None:
        """None when the budget is spent (the line is counted); else how many were left out before it."""
        with self._lock:
            now = self._clock()
            if now - self._window_start >= self._window_s:
                self._window_start, self._written = now, 0
            if self._written >= self._burst:
                self._left_out += 1
                return None
            self._written += 1
            left_out, self._left_out = self._left_out, 0
            return left_out

    def warning(self, message: str, *args: object) -> bool:
        """Logs `message` when the budget allows; True when it was written."""
        left_out = self.take()
        if left_out is None:
            return False
        if left_out:
            self._logger.warning(message + " (and %d more like it not logged)", *args, left_out)
        else:
            self._logger.warning(message, *args)
        return True


class BudgetFilter(logging.Filter):
    """The same budget for what a library logs on a client's account (uvicorn's "Invalid HTTP request
    received.", the event loop's accept errors), attached to its logger."""

    def __init__(self, *, burst: int = 10, window_s: float = 60.0, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self._budget = LogBudget(logging.getLogger(__name__), burst=burst, window_s=window_s, clock=clock)

    def filter(self, record: logging.LogRecord) -> bool:
        left_out = self._budget.take()
        if left_out is None:
            return False
        if left_out and isinstance(record.msg, str):
            record.msg = f"{record.msg} (and {left_out} more like it not logged)"
        return True


class OneLineFor(BudgetFilter):
    """A library that logs a traceback at ERROR for something any client can cause at will (hanging up
    before its request arrived whole): each such record becomes one WARNING line without the traceback,
    under its own budget. The logger's other records keep their tracebacks, under the general budget."""

    def __init__(
        self,
        kinds: tuple[type[BaseException], ...],
        line: str,
        *,
        burst: int = 10,
        window_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(burst=burst, window_s=window_s, clock=clock)
        self._kinds = kinds
        self._line = line
        self._expected = LogBudget(logging.getLogger(__name__), burst=burst, window_s=window_s, clock=clock)

    def filter(self, record: logging.LogRecord) -> bool:
        raised = record.exc_info[1] if record.exc_info else None
        if not isinstance(raised, self._kinds):
            return super().filter(record)
        left_out = self._expected.take()
        if left_out is None:
            return False
        record.msg = f"{self._line} (and {left_out} more like it not logged)" if left_out else self._line
        record.args = None
        record.exc_info, record.exc_text, record.stack_info = None, None, None
        record.levelno, record.levelname = logging.WARNING, logging.getLevelName(logging.WARNING)
        return True
