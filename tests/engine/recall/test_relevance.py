"""Relevance as a pure decision (engine/recall/relevance.py): what counts as a match, and when a search
has found nothing clearly about its query."""

from __future__ import annotations

from engram_memory.engine.recall.ranking import Scored
from engram_memory.engine.recall.relevance import Floors, relevance_formula, relevant_ids

FLOORS = Floors(lexical=0.1, cosine=0.15, clear=0.4, weight=0.5, lead=0.12)
FLAT = [(f"mem_{n}", 0.2) for n in range(8)]


def test_without_calibrated_floors_every_candidate_is_returned() -> None:
    assert relevant_ids([Scored("a", 1.0)], 1.0, [], None, names_scope=False) is None


def test_a_strong_lexical_match_is_returned_and_weak_ones_beside_it() -> None:
    found = relevant_ids([Scored("a", 2.0), Scored("b", 0.3)], 2.0, [("b", 0.16)], FLOORS, names_scope=False)
    assert found == {"a", "b"}


def test_weak_matches_alone_are_no_answer() -> None:
    assert relevant_ids([Scored("a", 0.3)], 2.0, FLAT, FLOORS, names_scope=False) == set()


def test_a_query_naming_what_the_scope_is_about_keeps_its_weak_matches() -> None:
    assert relevant_ids([Scored("a", 0.3)], 2.0, FLAT, FLOORS, names_scope=True) == {"a", *dict(FLAT)}


def test_a_neighbour_far_ahead_of_the_rest_is_a_clear_match_across_languages() -> None:
    leading = [("ko", 0.33), *FLAT]
    assert relevant_ids([], 2.0, leading, FLOORS, names_scope=False) == {"ko", *dict(FLAT)}


def test_below_the_cosine_floor_a_neighbour_is_never_returned() -> None:
    assert "far" not in (relevant_ids([Scored("a", 2.0)], 2.0, [("far", 0.1)], FLOORS, names_scope=True) or set())


def test_the_floors_are_named_in_the_formula() -> None:
    assert (
        relevance_formula(FLOORS)
        == "[relevant:lex>=0.1*sum(idf)|cos>=0.15;answer:frequent|cos+0.5*lex>=0.4|cos1-cos5>=0.12]"
    )
