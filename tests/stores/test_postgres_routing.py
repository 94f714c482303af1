"""The positions a scope's reads must reach (stores/postgres/routing.py); the reads themselves are shown on
real standbys in tests/topology."""

from __future__ import annotations

from engram_memory.engine.ports.rows import Scope
from engram_memory.stores.postgres.routing import Positions

A, B, C = Scope("t", "a"), Scope("t", "b"), Scope("t", "c")


def test_a_scope_needs_its_own_latest_position_and_never_goes_back() -> None:
    positions = Positions()
    assert positions.required(A) == 0
    positions.advance((A,), 500)
    positions.advance((A,), 300)  # an older read seen later does not lower it
    assert positions.required(A) == 500
    assert positions.required(B) == 0


def test_a_write_of_the_whole_store_is_needed_by_every_scope() -> None:
    positions = Positions()
    positions.advance((A,), 100)
    positions.advance(None, 700)
    assert positions.required(A) == positions.required(B) == 700


def test_a_forgotten_scope_position_becomes_everyones_floor() -> None:
    positions = Positions(capacity=2)
    positions.advance((A,), 900)
    positions.advance((B,), 100)
    positions.advance((C,), 200)  # A, the least recent, is evicted: its reads must still see its writes
    assert positions.required(A) == 900
    assert positions.required(B) == 900
