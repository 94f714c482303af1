"""A client can cause log lines; a flood of them writes a bounded number, and says how many it left out."""

from __future__ import annotations

import logging

import pytest

from engram_memory.mcp.log_budget import LogBudget, OneLineFor


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_flood_writes_the_burst_then_counts_the_rest(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    budget = LogBudget(logging.getLogger("budget-test"), burst=3, window_s=60, clock=clock)
    with caplog.at_level(logging.WARNING, logger="budget-test"):
        written = [budget.warning("bad line %d", n) for n in range(10_000)]
        assert sum(written) == 3 and len(caplog.records) == 3
        clock.now = 59.9
        assert budget.warning("bad line %d", 10_000) is False
        clock.now = 60.0
        assert budget.warning("bad line %d", 10_001) is True
    assert caplog.records[-1].getMessage() == "bad line 10001 (and 9998 more like it not logged)"


def test_a_quiet_client_is_logged_line_by_line(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    budget = LogBudget(logging.getLogger("budget-test"), burst=2, window_s=10, clock=clock)
    with caplog.at_level(logging.WARNING, logger="budget-test"):
        for n in range(5):
            clock.now = 10.0 * n
            assert budget.warning("event %d", n)
    assert [record.getMessage() for record in caplog.records] == [f"event {n}" for n in range(5)]


class _HungUp(Exception):
    pass


def _log_exception(logger: logging.Logger, raised: BaseException) -> None:
    try:
        raise raised
    except BaseException:
        logger.exception("Error handling POST request")


def test_a_client_caused_traceback_becomes_one_budgeted_line(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    logger = logging.getLogger("one-line-test")
    quiet = OneLineFor((_HungUp,), "a client hung up", burst=2, window_s=60, clock=clock)
    logger.addFilter(quiet)
    try:
        with caplog.at_level(logging.WARNING, logger="one-line-test"):
            for _ in range(1_000):
                _log_exception(logger, _HungUp())
            clock.now = 60.0
            _log_exception(logger, _HungUp())
            _log_exception(logger, ValueError("a real fault"))
    finally:
        logger.removeFilter(quiet)
    hung_up, fault = caplog.records[:-1], caplog.records[-1]
    assert [r.getMessage() for r in hung_up] == ["a client hung up"] * 2 + [
        "a client hung up (and 998 more like it not logged)"
    ]
    assert all(r.levelno == logging.WARNING and r.exc_info is None for r in hung_up)
    assert fault.levelno == logging.ERROR and fault.exc_info is not None  # what is not the client's keeps its traceback
