"""The embedded store's impact-ordered postings: kept exactly with the FTS5 rows, derived for an older
store, read only as deep as TERM_DEPTH, and bypassed for a stop word."""

from __future__ import annotations

import sqlite3

import pytest

from engram_memory.contract.errors import ContractError
from engram_memory.engine.ports.store import Scope
from engram_memory.engine.recall.ranking import FIELDS
from engram_memory.engine.recall.text import query_terms, tokenizer_id
from engram_memory.host.settings import HostPaths
from engram_memory.stores.sql.base import StoreInvariantError
from engram_memory.stores.sqlite import postings
from engram_memory.stores.sqlite.queries import _match_expression
from engram_memory.stores.sqlite.store import SQLiteStore
from tests.support.clocks import ManualClock
from tests.support.engines import steered_engine
from tests.support.homes import bind
from tests.support.inprocess import InProcessAgent
from tests.support.payloads import capture_args

TOKENIZER_ID = tokenizer_id()

NOTES = [
    "The ferry to Aland leaves at six from the west pier.",
    "Ferry tickets are cheaper when booked a week ahead.",
    "The west pier is closed for repairs until March.",
    "Lunch on the ferry is served from noon.",
    "She has been to Aland twice and loved the ferry ride.",
]


def _agent_scope(paths: HostPaths) -> tuple[Scope, str]:
    binding = bind(paths).binding
    return Scope(binding.tenant, binding.workspace), binding.purpose_ref


def _fts_counts(db: sqlite3.Connection, scope: Scope, terms: list[str]) -> dict[str, int]:
    return {
        term: db.execute(
            "SELECT count(*) FROM lexical_index WHERE lexical_index MATCH ?", (_match_expression(scope, [term]),)
        ).fetchone()[0]
        for term in terms
    }


def test_term_counts_equal_the_full_text_index_counts(sqlite_paths: HostPaths) -> None:
    paths = sqlite_paths
    scope, _ = _agent_scope(paths)
    with steered_engine(paths, clock=ManualClock(), semantic=False) as engine:
        agent = InProcessAgent(engine, bind(paths).binding)
        for note in NOTES:
            agent.remember(note)
    terms = ["ferri", "aland", "pier", "west", "noon", "the", "absent"]
    with sqlite3.connect(paths.sqlite_file) as db:
        assert postings.doc_counts(db, scope, terms) == _fts_counts(db, scope, terms)


def test_forgetting_the_last_holder_of_a_term_leaves_no_row_of_it(sqlite_paths: HostPaths) -> None:
    paths = sqlite_paths
    with steered_engine(paths, clock=ManualClock(), semantic=False) as engine:
        agent = InProcessAgent(engine, bind(paths).binding)
        kept = agent.remember("The quorum spans three zones.")
        gone = agent.remember("The quorum uses the zanzibarquux protocol.")
        forget = {"record_id": gone, "idempotency_key": "forget-key-000001", "reason_ref": "reason:test"}
        assert agent.error_code("engram_memory_forget", forget) == "gate_failed"
        confirmation = engine.confirmations()[0][0].confirmation_id
        engine.approve_confirmation(confirmation, decided_by="host:test", ttl_ms=60_000)
        agent.value("engram_memory_forget", forget)
        assert agent.found_ids("quorum") == [kept]
    with sqlite3.connect(paths.sqlite_file) as db:
        for table in ("lexical_index_postings", "lexical_index_terms"):
            assert db.execute(f"SELECT count(*) FROM {table} WHERE term = 'zanzibarquux'").fetchone() == (0,)
        assert db.execute("SELECT docs FROM lexical_index_terms WHERE term = 'quorum'").fetchone() == (1,)


def test_a_store_indexed_before_postings_gets_them_when_it_opens(sqlite_paths: HostPaths) -> None:
    paths = sqlite_paths
    with steered_engine(paths, clock=ManualClock(), semantic=False) as engine:
        agent = InProcessAgent(engine, bind(paths).binding)
        ids = [agent.remember(note) for note in NOTES]
    with sqlite3.connect(paths.sqlite_file) as db:
        before = db.execute("SELECT * FROM lexical_index_postings ORDER BY 1, 2, 3, 4").fetchall()
        terms = db.execute("SELECT * FROM lexical_index_terms ORDER BY 1, 2").fetchall()
        db.execute("DELETE FROM lexical_index_postings")
        db.execute("DELETE FROM lexical_index_terms")
    SQLiteStore(paths.sqlite_file).close()
    with sqlite3.connect(paths.sqlite_file) as db:
        assert db.execute("SELECT * FROM lexical_index_postings ORDER BY 1, 2, 3, 4").fetchall() == before
        assert db.execute("SELECT * FROM lexical_index_terms ORDER BY 1, 2").fetchall() == terms
    with steered_engine(paths, clock=ManualClock(), semantic=False) as engine:
        agent = InProcessAgent(engine, bind(paths).binding)
        assert agent.found_ids("west pier repairs")[:1] == [ids[2]]


def test_a_common_term_is_read_only_as_deep_as_term_depth(
    sqlite_paths: HostPaths, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With depth 2, only the two memories where "ferri" weighs most can come from its postings."""
    paths = sqlite_paths
    scope, _ = _agent_scope(paths)
    with steered_engine(paths, clock=ManualClock(), semantic=False) as engine:
        agent = InProcessAgent(engine, bind(paths).binding)
        short = agent.remember("Ferry ferry.")
        shorter = agent.remember("Ferry.")
        for note in NOTES:
            agent.remember(note)
    monkeypatch.setattr(postings, "TERM_DEPTH", 2)
    with sqlite3.connect(paths.sqlite_file) as db:
        rid = dict(db.execute("SELECT record_id, rid FROM records").fetchall())
        found = postings.best(db, scope, ["ferri"], doc_count=7, limit=10)
    assert sorted(found) == sorted([rid[short], rid[shorter]])


def test_the_best_hold_the_most_weighted_impact_and_ties_go_to_the_lower_rowid(sqlite_paths: HostPaths) -> None:
    """Shares of several terms add up per memory; memories equal for the terms tie and come in rowid order."""
    paths = sqlite_paths
    scope, _ = _agent_scope(paths)
    with steered_engine(paths, clock=ManualClock(), semantic=False) as engine:
        agent = InProcessAgent(engine, bind(paths).binding)
        twins = [agent.remember("The heron nests by the dam."), agent.remember("The heron rests by the dam.")]
        both = agent.remember("A heron fished below the old mill.")
        mill = agent.remember("The mill wheel turns again.")
        for note in NOTES:
            agent.remember(note)
    with sqlite3.connect(paths.sqlite_file) as db:
        rid = dict(db.execute("SELECT record_id, rid FROM records").fetchall())
        found = postings.best(db, scope, ["heron", "mill"], doc_count=len(NOTES) + 4, limit=10)
        assert postings.best(db, scope, ["unheard"], doc_count=len(NOTES) + 4, limit=10) == []
    assert found[0] == rid[both]
    assert set(found) == {rid[both], rid[mill], *(rid[twin] for twin in twins)}
    assert found.index(rid[twins[0]]) + 1 == found.index(rid[twins[1]])


def test_a_query_of_stop_words_is_answered_from_the_full_text_index(sqlite_paths: HostPaths) -> None:
    paths = sqlite_paths
    with steered_engine(paths, clock=ManualClock(), semantic=False) as engine:
        agent = InProcessAgent(engine, bind(paths).binding)
        record_id = agent.remember("To be or not to be.")
        agent.remember("A memory about something else entirely.")
        assert postings.posted(query_terms("to be or not")) == []
        assert agent.found_ids("to be or not")[:1] == [record_id]


def test_a_stop_word_among_other_words_only_adds_to_the_scores(sqlite_paths: HostPaths) -> None:
    """'owned' stems to the stop word 'own': the other word finds the memories, both score them."""
    paths = sqlite_paths
    with steered_engine(paths, clock=ManualClock(), semantic=False) as engine:
        agent = InProcessAgent(engine, bind(paths).binding)
        both = agent.remember("The dolphin he owned lived in the bay.")
        one = agent.remember("A dolphin swam past the pier.")
        agent.remember("He owned a small boat.")
        terms = query_terms("owned dolphin")
        assert postings.posted(terms) == ["dolphin"] and "own" in terms
        assert agent.found_ids("owned dolphin")[:2] == [both, one]


def _fields(db: sqlite3.Connection, record_id: str) -> dict[str, str]:
    row = db.execute(
        "SELECT " + ", ".join(f"f.f_{name}" for name in FIELDS) + " FROM lexical_index AS f"
        " JOIN records AS r ON r.rid = f.rowid WHERE r.record_id = ?",
        (record_id,),
    ).fetchone()
    return {name: str(value or "") for name, value in zip(FIELDS, row, strict=True)}


def _posted_rows(db: sqlite3.Connection, record_id: str) -> int:
    return int(
        db.execute(
            "SELECT count(*) FROM lexical_index_postings WHERE rid = (SELECT rid FROM records WHERE record_id = ?)",
            (record_id,),
        ).fetchone()[0]
    )


def test_a_batch_writes_its_postings_at_its_end_and_keeps_them_exact(sqlite_paths: HostPaths) -> None:
    """Inside a batch: a memory unindexed and indexed again, a savepoint that rolls back its indexing, an
    index write cancelled before the end, and a read that must see what is still pending."""
    paths = sqlite_paths
    scope, _ = _agent_scope(paths)
    with steered_engine(paths, clock=ManualClock(), semantic=False) as engine:
        agent = InProcessAgent(engine, bind(paths).binding)
        moved, rolled_back, cancelled = (agent.remember(note) for note in NOTES[:3])
    store = SQLiteStore(paths.sqlite_file)
    try:
        fields = {record: _fields(store._db, record) for record in (moved, rolled_back, cancelled)}
        with store.batch():
            with store.write() as tx:
                assert tx.unindex_record(scope, moved)
                tx.index_record(scope, moved, fields[moved], tokenizer=TOKENIZER_ID)
            with store.write() as tx:
                assert tx.unindex_record(scope, rolled_back)
            with pytest.raises(ContractError), store.write() as tx:
                tx.index_record(scope, rolled_back, fields[rolled_back], tokenizer=TOKENIZER_ID)
                raise StoreInvariantError("roll this savepoint back")
            with store.write() as tx:
                assert tx.unindex_record(scope, cancelled)
                tx.index_record(scope, cancelled, fields[cancelled], tokenizer=TOKENIZER_ID)
                assert tx.unindex_record(scope, cancelled)
            assert _posted_rows(store._db, moved) == 0  # still pending
            with store.read() as tx:
                found = tx.lexical_candidates(scope, query_terms("ferry Aland"), valid_at_ms=10**13, limit=10)
            assert [doc.record_id for doc in found] == [moved]
        with store.read() as tx:
            assert tx.index_integrity_ok()
        assert _posted_rows(store._db, moved) > 0
        assert _posted_rows(store._db, rolled_back) == 0 and _posted_rows(store._db, cancelled) == 0
    finally:
        store.close()


def test_an_import_leaves_postings_exactly_as_the_index_rows_imply(sqlite_paths: HostPaths) -> None:
    paths = sqlite_paths
    scope, _ = _agent_scope(paths)
    binding = bind(paths).binding
    items = [
        (capture_args(text, key=f"posted-capture-{n:04d}"), f"posted-admit-{n:04d}")
        for n, text in enumerate([*NOTES, "", NOTES[0]])
    ]
    with steered_engine(paths, clock=ManualClock(), semantic=False) as engine:
        outcomes = engine.import_memories(binding, items)
        assert outcomes[len(NOTES)].captured["error"]["code"] == "INVALID_SCHEMA"
        assert InProcessAgent(engine, binding).found_ids("west pier repairs")
    terms = ["ferri", "aland", "pier", "west", "noon", "the"]
    with sqlite3.connect(paths.sqlite_file) as db:
        assert postings.consistent(db)
        assert postings.doc_counts(db, scope, terms) == _fts_counts(db, scope, terms)
