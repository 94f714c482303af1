"""Dates a query names: which forms are read, the windows they become, and what is left for the model."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from engram_memory.engine.recall.timeref import DateWindow, named_windows, without_dates


def _ms(year: int, month: int, day: int) -> int:
    return int(datetime(year, month, day, tzinfo=UTC).timestamp() * 1000)


DAY = DateWindow(_ms(2023, 11, 16), _ms(2023, 11, 17))


@pytest.mark.parametrize(
    "query",
    [
        "What did Tim say about his injury on 16 November, 2023?",
        "on 16 November 2023",
        "on 16th of November, 2023",
        "November 16, 2023",
        "Nov. 16 2023",
        "nov 16th, 2023",
        "the entry of 2023-11-16 please",
    ],
)
def test_a_named_day_becomes_that_whole_utc_day(query: str) -> None:
    assert named_windows(query) == (DAY,)


def test_a_named_month_becomes_the_whole_month_and_december_ends_at_the_new_year() -> None:
    assert named_windows("what happened in May 2023") == (DateWindow(_ms(2023, 5, 1), _ms(2023, 6, 1)),)
    assert named_windows("December, 2022 plans") == (DateWindow(_ms(2022, 12, 1), _ms(2023, 1, 1)),)


@pytest.mark.parametrize(
    "query",
    [
        "May I ask what the plan is?",
        "the second week of November",
        "30 February 2023",
        "2023-13-01",
        "16 November",
        "in 2023",
        "release 1.16.2023",
    ],
)
def test_forms_without_a_full_valid_date_are_left_as_words(query: str) -> None:
    assert named_windows(query) == ()
    assert without_dates(query) == query


def test_several_dates_are_kept_once_each_in_order() -> None:
    windows = named_windows("between 2 March 2023 and 1 April 2023, or 2 March 2023 again")
    assert windows == (DateWindow(_ms(2023, 3, 2), _ms(2023, 3, 3)), DateWindow(_ms(2023, 4, 1), _ms(2023, 4, 2)))


def test_a_window_holds_its_start_and_not_its_end() -> None:
    assert DAY.holds(DAY.start_ms) and DAY.holds(DAY.end_ms - 1)
    assert not DAY.holds(DAY.end_ms) and not DAY.holds(DAY.start_ms - 1)


def test_the_model_reads_the_query_without_its_dates_unless_nothing_else_is_left() -> None:
    assert without_dates("What did Gina find on 1 February, 2023?") == "What did Gina find on ?"
    assert without_dates("1 February 2023") == "1 February 2023"
