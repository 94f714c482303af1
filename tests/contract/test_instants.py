"""Instants: one canonical spelling, real calendar dates only."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engram_memory.contract.instants import format_instant, parse_instant


@given(st.integers(min_value=-62_135_596_800_000, max_value=253_402_300_799_999))
def test_instants_round_trip(epoch_ms: int) -> None:
    assert parse_instant(format_instant(epoch_ms)) == epoch_ms


@pytest.mark.parametrize(
    "text",
    [
        "2026-02-30T00:00:00.000Z",
        "2026-13-01T00:00:00.000Z",
        "2026-01-01T24:00:00.000Z",
        "2026-01-01T00:00:60.000Z",
        "2026-01-01T00:00:00Z",
        "2026-01-01T00:00:00.00Z",
        "2026-01-01T00:00:00.000+00:00",
        "2026-01-01 00:00:00.000Z",
        "0000-01-01T00:00:00.000Z",
        "\uff12026-01-01T00:00:00.000Z",
    ],
)
def test_parse_instant_refuses_non_canonical_or_impossible(text: str) -> None:
    assert parse_instant(text) is None


def test_parse_instant_accepts_a_leap_day() -> None:
    assert parse_instant("2024-02-29T12:00:00.123Z") == 1_709_208_000_123
