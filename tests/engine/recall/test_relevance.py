"""Relevance as a pure decision (engine/recall/relevance.py): what counts as a match, and when a search
has found nothing clearly about its query."""

from __future__ import annotations

from engram_memory.engine.ports.store import IndexedDoc
from engram_memory.engine.recall.relevance import Floors, lexical_shares, relevance_formula, relevant_ids, script_of

FLOORS = Floors(lexical=0.1, cosine=0.15, clear=0.4, weight=0.5, lead=0.12, cross=0.3)
FLAT = [(f"mem_{n}", 0.2) for n in range(8)]


def _doc(record_id: str, primary: str, context: str = "") -> IndexedDoc:
    fields = {"primary": primary, "decision": "", "evidence": "", "context": context, "citations": ""}
    return IndexedDoc(record_id, fields, 0, None)


def test_a_share_is_the_idf_of_the_terms_a_memory_holds_whatever_its_length() -> None:
    df = {"rare": 1, "common": 9}
    docs = [_doc("a", "rare common"), _doc("b", "common " * 40), _doc("c", "unrelated", context="rare")]
    shares = lexical_shares(["rare", "common"], df, 10, docs)
    assert shares["a"] == 1.0 and shares["c"] > 0.5 > shares["b"] > 0.0


def test_without_calibrated_floors_every_candidate_is_returned() -> None:
    assert relevant_ids({"a": 1.0}, [], None, names_scope=False) is None


def test_a_strong_lexical_match_is_returned_and_weak_ones_beside_it() -> None:
    assert relevant_ids({"a": 1.0, "b": 0.15}, [("c", 0.16)], FLOORS, names_scope=False) == {"a", "b", "c"}


def test_a_memory_holding_every_telling_term_is_an_answer_whatever_the_model_thinks() -> None:
    assert relevant_ids({"a": 1.0}, [("a", -0.05)], FLOORS, names_scope=False) == {"a"}


def test_weak_matches_alone_are_no_answer() -> None:
    assert relevant_ids({"a": 0.15}, FLAT, FLOORS, names_scope=False) == set()


def test_a_query_naming_what_the_scope_is_about_keeps_its_weak_matches() -> None:
    assert relevant_ids({"a": 0.15}, FLAT, FLOORS, names_scope=True) == {"a", *dict(FLAT)}


def test_a_neighbour_far_ahead_of_the_rest_is_a_clear_match_across_languages() -> None:
    leading = [("ko", 0.33), *FLAT]
    assert relevant_ids({}, leading, FLOORS, names_scope=False) == {"ko", *dict(FLAT)}


def test_a_memory_in_another_script_than_the_query_is_clear_at_a_lower_cosine() -> None:
    near = [("en", 0.31), ("mem_1", 0.3), *FLAT]
    assert relevant_ids({}, near, FLOORS, names_scope=False) == set()
    found = relevant_ids({}, near, FLOORS, names_scope=False, crosses=lambda record_id: record_id == "en")
    assert found == {"en", "mem_1", *dict(FLAT)}
    assert relevant_ids({}, near, FLOORS, names_scope=False, crosses=lambda record_id: False) == set()


def test_scripts_are_what_decides_whether_two_texts_can_share_a_term() -> None:
    assert [script_of(t) for t in ("deploy", "배포", "部署", "部署する", "デプロイ")] == [
        "latin",
        "hangul",
        "han",
        "han",
        "han",
    ]


def test_below_both_floors_a_candidate_is_never_returned() -> None:
    found = relevant_ids({"a": 1.0, "b": 0.05}, [("far", 0.1)], FLOORS, names_scope=True)
    assert found == {"a"}


def test_the_floors_are_named_in_the_formula() -> None:
    assert relevance_formula(FLOORS) == (
        "[relevant:lex>=0.1|cos>=0.15;answer:frequent|lex=1|cos+0.5*lex>=0.4|cos1-cos5>=0.12|other_script:cos>=0.3]"
    )
