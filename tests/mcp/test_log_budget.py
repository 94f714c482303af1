"""A client can cause log lines; a flood of them writes a bounded number, and says how many it left out."""

from __future__ import annotations

import logging

import pytest

from engram_memory.mcp.log_budget import LogBudget


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
