"""Page cursors: what one key minted, only that key opens, byte for byte."""

from __future__ import annotations

import os

from hypothesis import given
from hypothesis import strategies as st

from engram_memory.engine.recall.cursors import mint_cursor, open_cursor

KEY = os.urandom(32)


def test_cursor_round_trips() -> None:
    claims = {"v": 1, "offset": 10, "request_digest": "sha256:" + "a" * 64}
    assert open_cursor(KEY, mint_cursor(KEY, claims)) == claims


def test_cursor_from_another_key_does_not_open() -> None:
    assert open_cursor(os.urandom(32), mint_cursor(KEY, {"offset": 1})) is None


@given(st.integers(min_value=0, max_value=200), st.characters(codec="ascii"))
def test_any_single_character_change_breaks_the_cursor(position: int, replacement: str) -> None:
    cursor = mint_cursor(KEY, {"offset": 3, "records_cursor": 7})
    index = position % len(cursor)
    if cursor[index] == replacement:
        return
    changed = cursor[:index] + replacement + cursor[index + 1 :]
    assert open_cursor(KEY, changed) is None


@given(st.text(max_size=300))
def test_arbitrary_text_never_opens_or_raises(text: str) -> None:
    assert open_cursor(KEY, text) is None
