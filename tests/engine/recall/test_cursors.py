"""Page cursors: what one key minted for one request, only that key opens for that request, byte for byte."""

from __future__ import annotations

import os

from hypothesis import given
from hypothesis import strategies as st

from engram_memory.engine.recall.cursors import PagePin, mint_cursor, open_cursor

KEY = os.urandom(32)
REQUEST = "sha256:" + "a" * 64
PIN = PagePin(offset=10, records_cursor=7, valid_as_of=1_764_547_200_000, system_as_of=1_764_547_200_123)


def test_cursor_round_trips() -> None:
    assert open_cursor(KEY, mint_cursor(KEY, REQUEST, PIN), REQUEST) == PIN


def test_cursor_is_short() -> None:
    assert len(mint_cursor(KEY, REQUEST, PIN)) <= 64


def test_cursor_from_another_key_does_not_open() -> None:
    assert open_cursor(os.urandom(32), mint_cursor(KEY, REQUEST, PIN), REQUEST) is None


def test_cursor_presented_with_another_request_does_not_open() -> None:
    assert open_cursor(KEY, mint_cursor(KEY, REQUEST, PIN), "sha256:" + "b" * 64) is None


@given(st.integers(min_value=0, max_value=200), st.characters(codec="ascii"))
def test_any_single_character_change_breaks_the_cursor(position: int, replacement: str) -> None:
    cursor = mint_cursor(KEY, REQUEST, PIN)
    index = position % len(cursor)
    if cursor[index] == replacement:
        return
    changed = cursor[:index] + replacement + cursor[index + 1 :]
    assert open_cursor(KEY, changed, REQUEST) is None


@given(st.text(max_size=300))
def test_arbitrary_text_never_opens_or_raises(text: str) -> None:
    assert open_cursor(KEY, text, REQUEST) is None


@given(st.binary(max_size=80))
def test_arbitrary_bytes_after_the_prefix_never_open_or_raise(data: bytes) -> None:
    import base64

    assert open_cursor(KEY, "pc2." + base64.urlsafe_b64encode(data).decode().rstrip("="), REQUEST) is None
