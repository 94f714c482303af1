"""Dates and numbers as the person's language writes them (Babel's CLDR data, shipped in its package).

Instants stay in UTC and say so. English keeps ISO 8601 (2026-01-31T09:00:00Z): the host has one English
catalogue for readers in every region, and a numeric date in one region's order misleads another's;
Korean, Chinese and Japanese each write one unambiguous year-month-day order of their own.
"""

from __future__ import annotations

from datetime import UTC, datetime

from babel.dates import format_datetime
from babel.numbers import format_decimal

from engram_memory.contract.instants import format_instant
from engram_memory.host.language.catalogue import current
from engram_memory.host.language.choice import Language


def when(epoch_ms: int | None) -> str:
    """An instant for a person; `-` for none."""
    if epoch_ms is None:
        return "-"
    try:
        language = current()
        if language is Language.EN:
            return format_instant(epoch_ms)
        moment = datetime.fromtimestamp(epoch_ms / 1000, tz=UTC)
        return f"{format_datetime(moment, 'medium', tzinfo=UTC, locale=language.babel)} UTC"
    except (OverflowError, ValueError, OSError):
        return f"{epoch_ms} ms"


def number(value: int | float) -> str:
    return format_decimal(value, locale=current().babel)
