"""Calendar dates a query names ("on 16 November, 2023", "in May 2023", "2023-11-16").

An agent asking what happened on a day means the memories whose event time falls on that day, and
neither channel can see that: the words of a date are rarely in the memory's text, and a sentence
embedding places "16 November" near any other date. The dates become windows (UTC, whole days or
whole months) that ranking uses to favour memories inside them, and they are taken out of the text
the model embeds. Only unambiguous English forms with a four-digit year are read; anything else is
left as words.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from types import MappingProxyType

__all__ = ["DateWindow", "named_windows", "without_dates"]

_MONTHS = MappingProxyType(
    {
        name: number
        for number, names in enumerate(
            (
                ("january", "jan"),
                ("february", "feb"),
                ("march", "mar"),
                ("april", "apr"),
                ("may",),
                ("june", "jun"),
                ("july", "jul"),
                ("august", "aug"),
                ("september", "sep", "sept"),
                ("october", "oct"),
                ("november", "nov"),
                ("december", "dec"),
            ),
            start=1,
        )
        for name in names
    }
)
_MONTH = "(?P<{}>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_DAY = r"(?P<{}>[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR = r"(?P<{}>(?:19|20)\d\d)"
_PATTERN = re.compile(
    r"\b(?:"
    + rf"{_DAY.format('d1')}\s+(?:of\s+)?{_MONTH.format('m1')},?\s+{_YEAR.format('y1')}"
    + rf"|{_MONTH.format('m2')}\s+{_DAY.format('d2')},?\s+{_YEAR.format('y2')}"
    + rf"|{_YEAR.format('y3')}-(?P<m3>[01]\d)-(?P<d3>[0-3]\d)"
    + rf"|{_MONTH.format('m4')},?\s+(?:of\s+)?{_YEAR.format('y4')}"
    + r")\b",
    re.IGNORECASE,
)
_DAY_MS = 24 * 3600 * 1000


@dataclass(frozen=True, slots=True)
class DateWindow:
    """[start_ms, end_ms): a whole UTC day or month."""

    start_ms: int
    end_ms: int

    def holds(self, at_ms: int) -> bool:
        return self.start_ms <= at_ms < self.end_ms


def _ms(year: int, month: int, day: int) -> int | None:
    try:
        return int(datetime(year, month, day, tzinfo=UTC).timestamp() * 1000)
    except ValueError:
        return None


def _month_number(text: str) -> int:
    return _MONTHS[text.lower().rstrip(".")]


def _window(match: re.Match[str]) -> DateWindow | None:
    groups = match.groupdict()
    if groups["y4"] is not None:
        year, month = int(groups["y4"]), _month_number(groups["m4"])
        start = _ms(year, month, 1)
        end = _ms(year + 1, 1, 1) if month == 12 else _ms(year, month + 1, 1)
        return None if start is None or end is None else DateWindow(start, end)
    if groups["y1"] is not None:
        year, month, day = int(groups["y1"]), _month_number(groups["m1"]), int(groups["d1"])
    elif groups["y2"] is not None:
        year, month, day = int(groups["y2"]), _month_number(groups["m2"]), int(groups["d2"])
    else:
        year, month, day = int(groups["y3"]), int(groups["m3"]), int(groups["d3"])
    start = None if not 1 <= month <= 12 else _ms(year, month, day)
    return None if start is None else DateWindow(start, start + _DAY_MS)


def named_windows(query: str) -> tuple[DateWindow, ...]:
    """Every valid date the query names, in order; impossible dates (30 February) are ignored."""
    windows = (_window(match) for match in _PATTERN.finditer(query))
    return tuple(dict.fromkeys(window for window in windows if window is not None))


def without_dates(query: str) -> str:
    """The query with the dates `named_windows` reads taken out, or the query itself if nothing else is left."""
    stripped = " ".join(_PATTERN.sub(lambda m: " " if _window(m) else m.group(0), query).split())
    return stripped or query
