"""One conformance suite for the store port: every test runs on SQLite and on PostgreSQL, and must pass on both."""

from __future__ import annotations

import pytest

from engram_memory.contract.errors import ContractError, ErrorCode
from engram_memory.engine import journal
from engram_memory.engine.ports.maintenance import RecordFilter
from engram_memory.engine.ports.store import JournalEvent, SealedBody, Store, StoreTx
from engram_memory.engine.recall.ranking import FIELDS
from engram_memory.engine.recall.text import tokenizer_id
from engram_memory.stores.sql.queries.transaction import ENDED_OWNERS_CHUNK
from tests.stores.builders import (
    AT_MS,
    SCOPE_A,
    SCOPE_A2,
    SCOPE_B,
    audit,
    candidate,
    confirmation,
    event,
    fields,
    idempotency,
    new_id,
    record,
)

TOKENIZER_ID = tokenizer_id()


def indexed(tx: StoreTx, scope: object, record_id: str, **texts: str) -> None:
    """A current record of the scope, in the index with these field texts."""
    assert isinstance(scope, type(SCOPE_A))
    tx.insert_record(record(scope, record_id))
    tx.index_record(scope, record_id, fields(**texts), tokenizer=TOKENIZER_ID)


# -- journal --------------------------------------------------------------------------------------


def test_journal_round_trips_events_and_head(store: Store) -> None:
    with store.write() as tx:
        first = event(tx, SCOPE_A)
        second = event(tx, SCOPE_A, journal.CANDIDATE_ACCEPTED, record_id="mem_x", candidate_id="cand_x")
        event(tx, SCOPE_B)
    with store.read() as tx:
        assert list(tx.events(SCOPE_A)) == [first, second]
        head = tx.head(SCOPE_A)
        assert head is not None and (head.cursor, head.digest) == (2, second.event_digest)
        assert second.affects_records and head.records_cursor == 2
        assert tx.head(SCOPE_A2) is None
        assert journal.verify_chain(SCOPE_A, tx.events(SCOPE_A)).cursor == 2


def test_journal_refuses_a_second_event_at_a_cursor_and_writes_nothing(store: Store) -> None:
    with store.write() as tx:
        kept = event(tx, SCOPE_A)
    duplicate = JournalEvent(**{**{f: getattr(kept, f) for f in kept.__slots__}, "event_id": "evt_other"})
    with pytest.raises(ContractError) as raised, store.write() as tx:
        tx.insert_candidate(candidate(SCOPE_A, "cand_lost"))
        tx.append_event(duplicate)
    assert raised.value.code is ErrorCode.STORE_UNAVAILABLE
    with store.read() as tx:
        assert list(tx.events(SCOPE_A)) == [kept]
        assert tx.get_candidate(SCOPE_A, "cand_lost") is None


def test_failed_write_rolls_back_everything_it_did(store: Store) -> None:
    with pytest.raises(RuntimeError), store.write() as tx:
        event(tx, SCOPE_A)
        tx.put_body(SCOPE_A, "cand_1", SealedBody(b"n" * 12, b"c"))
        raise RuntimeError("the engine changed its mind")
    with store.read() as tx:
        assert tx.head(SCOPE_A) is None
        assert tx.get_body(SCOPE_A, "cand_1") is None


# -- candidates and records ---------------------------------------------------------------------------


def test_candidates_round_trip_and_stay_in_their_scope(store: Store) -> None:
    row = candidate(
        SCOPE_A, "cand_1", has_attestation=True, secret_categories=("jwt",), trust_class="earned", review_reasons=("x",)
    )
    with store.write() as tx:
        tx.insert_candidate(row)
        tx.insert_candidate(candidate(SCOPE_B, "cand_2"))
    with store.read() as tx:
        assert tx.get_candidate(SCOPE_A, "cand_1") == row
        assert tx.get_candidate(SCOPE_A2, "cand_1") is None
        assert tx.get_candidate(SCOPE_B, "cand_1") is None
    with store.write() as tx:
        tx.update_candidate(
            SCOPE_A, "cand_1", state="accepted_current", adjudication=True, record_id="mem_1", review_reasons=["r"]
        )
        tx.update_candidate(SCOPE_B, "cand_1", state="rejected", adjudication=False, record_id=None)
    with store.read() as tx:
        got = tx.get_candidate(SCOPE_A, "cand_1")
        assert got is not None and (got.state, got.adjudication, got.record_id, got.review_reasons) == (
            "accepted_current",
            True,
            "mem_1",
            ("r",),
        )
        assert tx.find_candidate("cand_2") == candidate(SCOPE_B, "cand_2")


def test_records_round_trip_state_and_digest_lookup(store: Store) -> None:
    row = record(SCOPE_A, "mem_1", valid_to_ms=AT_MS + 5, expires_at_ms=AT_MS + 9, trust_class="signed")
    with store.write() as tx:
        tx.insert_record(row)
        tx.insert_record(record(SCOPE_B, "mem_2"))
    with store.read() as tx:
        assert tx.get_record(SCOPE_A, "mem_1") == row
        assert tx.get_record(SCOPE_B, "mem_1") is None
        assert tx.find_record_by_digest(SCOPE_A, row.payload_digest, "accepted_current") == "mem_1"
        assert tx.find_record_by_digest(SCOPE_A2, row.payload_digest, "accepted_current") is None
    with store.write() as tx:
        tx.set_record_state(SCOPE_A, "mem_1", "historical", 7)
        tx.set_record_state(SCOPE_B, "mem_1", "tombstoned", 8)  # not this scope's record: nothing changes
    with store.read() as tx:
        got = tx.get_record(SCOPE_A, "mem_1")
        assert got is not None and (got.state, got.state_cursor) == ("historical", 7)
        assert tx.find_record_by_digest(SCOPE_A, row.payload_digest, "accepted_current") is None


def test_bodies_round_trip_are_destroyed_once_and_stay_in_their_scope(store: Store) -> None:
    body = SealedBody(nonce=bytes(range(12)), ciphertext=bytes(range(256)) * 4)
    with store.write() as tx:
        tx.insert_candidate(candidate(SCOPE_A, "cand_1"))
        tx.put_body(SCOPE_A, "cand_1", body)
    with store.read() as tx:
        assert tx.get_body(SCOPE_A, "cand_1") == body
        assert tx.get_body(SCOPE_B, "cand_1") is None
        assert tx.ended_owners(["cand_1", "cand_unknown"]) == set()
    with store.write() as tx:
        assert not tx.destroy_body(SCOPE_B, "cand_1")
        assert tx.destroy_body(SCOPE_A, "cand_1")
        assert not tx.destroy_body(SCOPE_A, "cand_1")
    with store.read() as tx:
        assert tx.get_body(SCOPE_A, "cand_1") is None
        assert tx.ended_owners(["cand_1", "cand_unknown"]) == {"cand_1"}


def test_ended_owners_answers_for_more_ids_than_one_statement_takes(store: Store) -> None:
    body = SealedBody(nonce=bytes(12), ciphertext=b"sealed")
    owners = [f"cand_{n:05d}" for n in range(ENDED_OWNERS_CHUNK * 2 + 7)]
    with store.write() as tx:
        for n, owner in enumerate(owners):
            tx.insert_candidate(candidate(SCOPE_A if n % 2 else SCOPE_B, owner))
            if n % 3:
                tx.put_body(SCOPE_A if n % 2 else SCOPE_B, owner, body)
    ended = {owner for n, owner in enumerate(owners) if n % 3 == 0}
    asked = [*reversed(owners), *owners[:10], "cand_unknown"]  # any order, repeats, an owner never seen
    with store.read() as tx:
        assert tx.ended_owners(asked) == ended
        assert tx.ended_owners([]) == set()


# -- the lexical index -------------------------------------------------------------------------------------


def test_index_candidates_are_the_scope_s_current_valid_unexpired_matches(store: Store) -> None:
    with store.write() as tx:
        event(tx, SCOPE_A)
        event(tx, SCOPE_B)
        indexed(tx, SCOPE_A, "mem_match", primary="blue green deploy", citations="doc handbook")
        indexed(tx, SCOPE_A, "mem_other", primary="red button")
        tx.insert_record(record(SCOPE_A, "mem_future", valid_from_ms=AT_MS + 1000))
        tx.index_record(SCOPE_A, "mem_future", fields(primary="green"), tokenizer=TOKENIZER_ID)
        tx.insert_record(record(SCOPE_A, "mem_expired", expires_at_ms=AT_MS))
        tx.index_record(SCOPE_A, "mem_expired", fields(decision="green"), tokenizer=TOKENIZER_ID)
        indexed(tx, SCOPE_B, "mem_b", primary="green")
    with store.read() as tx:
        found = tx.lexical_candidates(SCOPE_A, ["green", "nothing"], valid_at_ms=AT_MS, limit=10)
        assert [doc.record_id for doc in found] == ["mem_match"]
        assert dict(found[0].fields) == fields(primary="blue green deploy", citations="doc handbook")
        assert (found[0].valid_from_ms, found[0].valid_to_ms) == (AT_MS, None)
        assert tx.lexical_candidates(SCOPE_A, [], valid_at_ms=AT_MS, limit=10) == []
        assert tx.lexical_candidates(SCOPE_A2, ["green"], valid_at_ms=AT_MS, limit=10) == []
        assert tx.term_doc_counts(SCOPE_A, ["green", "red", "absent"]) == {"green": 3, "red": 1, "absent": 0}
        stats = tx.index_stats(SCOPE_A)
        assert stats.doc_count == 4
        assert dict(stats.field_token_totals) == {
            "primary": 6,
            "decision": 1,
            "evidence": 0,
            "context": 0,
            "citations": 2,
        }


def test_index_candidates_respect_state_and_the_pool_limit(store: Store) -> None:
    with store.write() as tx:
        event(tx, SCOPE_A)
        for number in range(5):
            indexed(tx, SCOPE_A, f"mem_{number}", primary=f"alpha beta{number}")
        tx.set_record_state(SCOPE_A, "mem_0", "accepted_disputed", 2)
    with store.read() as tx:
        assert len(tx.lexical_candidates(SCOPE_A, ["alpha"], valid_at_ms=AT_MS, limit=3)) == 3
        assert {d.record_id for d in tx.lexical_candidates(SCOPE_A, ["alpha"], valid_at_ms=AT_MS, limit=10)} == {
            "mem_1",
            "mem_2",
            "mem_3",
            "mem_4",
        }


def test_index_candidates_skip_a_best_ranked_run_of_ineligible_matches(store: Store) -> None:
    """The best-scored matches may all be not yet valid: the eligible ones behind them still come back."""
    with store.write() as tx:
        event(tx, SCOPE_A)
        for number in range(60):  # twice the word: they rank first, and none is valid yet
            tx.insert_record(record(SCOPE_A, f"mem_future_{number:02d}", valid_from_ms=AT_MS + 1000))
            tx.index_record(SCOPE_A, f"mem_future_{number:02d}", fields(primary="alpha alpha"), tokenizer=TOKENIZER_ID)
        indexed(tx, SCOPE_A, "mem_short", primary="alpha beta")
        indexed(tx, SCOPE_A, "mem_long", primary="alpha beta gamma delta epsilon zeta")
        indexed(tx, SCOPE_A, "mem_longer", primary="alpha beta gamma delta epsilon zeta eta theta iota kappa")
    with store.read() as tx:
        valid = {"mem_short", "mem_long", "mem_longer"}
        found = [d.record_id for d in tx.lexical_candidates(SCOPE_A, ["alpha"], valid_at_ms=AT_MS, limit=2)]
        assert len(found) == 2 and set(found) <= valid
        found = [d.record_id for d in tx.lexical_candidates(SCOPE_A, ["alpha"], valid_at_ms=AT_MS, limit=3)]
        assert set(found) == valid
        later = tx.lexical_candidates(SCOPE_A, ["alpha"], valid_at_ms=AT_MS + 1000, limit=3)
        assert all(doc.record_id.startswith("mem_future_") for doc in later)


def test_unindex_removes_the_entry_and_its_statistics(store: Store) -> None:
    with store.write() as tx:
        event(tx, SCOPE_A)
        indexed(tx, SCOPE_A, "mem_1", primary="one two", context="three")
        indexed(tx, SCOPE_A, "mem_2", primary="two")
    with store.write() as tx:
        assert not tx.unindex_record(SCOPE_B, "mem_1")
        assert tx.unindex_record(SCOPE_A, "mem_1")
        assert not tx.unindex_record(SCOPE_A, "mem_1")
        assert not tx.unindex_record(SCOPE_A, "mem_unknown")
        tx.purge_index()
    with store.read() as tx:
        assert [d.record_id for d in tx.lexical_candidates(SCOPE_A, ["two"], valid_at_ms=AT_MS, limit=5)] == ["mem_2"]
        stats = tx.index_stats(SCOPE_A)
        assert (stats.doc_count, stats.field_token_totals["primary"], stats.field_token_totals["context"]) == (1, 1, 0)
        assert [entry.record_id for entry in tx.index_entries(SCOPE_A)] == ["mem_2"]


def test_indexing_needs_the_record_and_the_scope_s_journal(store: Store) -> None:
    with pytest.raises(ContractError) as raised, store.write() as tx:
        tx.index_record(SCOPE_A, "mem_absent", fields(primary="x"), tokenizer=TOKENIZER_ID)
    assert raised.value.code is ErrorCode.STORE_UNAVAILABLE
    with pytest.raises(ContractError), store.write() as tx:
        tx.insert_record(record(SCOPE_A, "mem_1"))
        tx.index_record(
            SCOPE_A, "mem_1", fields(primary="x"), tokenizer=TOKENIZER_ID
        )  # no journal yet: no statistics row


def test_index_matches_tokens_of_any_script_and_length(store: Store) -> None:
    long_token = "z" * 300
    with store.write() as tx:
        event(tx, SCOPE_A)
        indexed(tx, SCOPE_A, "mem_1", primary=f"东 京 ünïcode {long_token}", evidence="o'brien x\\y")
    with store.read() as tx:
        for term in ["东", "ünïcode", long_token, "o'brien", "x\\y"]:
            assert [d.record_id for d in tx.lexical_candidates(SCOPE_A, [term], valid_at_ms=AT_MS, limit=5)] == [
                "mem_1"
            ], term
        assert tx.lexical_candidates(SCOPE_A, ["z" * 299], valid_at_ms=AT_MS, limit=5) == []


# -- tombstones, idempotency, confirmations, audit -----------------------------------------------------


def test_tombstones_are_idempotent_and_per_scope(store: Store) -> None:
    with store.write() as tx:
        tx.add_tombstone(SCOPE_A, ["sha256:t"], AT_MS)
        tx.add_tombstone(SCOPE_A, ["sha256:t", "fp1:x"], AT_MS + 1)
    with store.read() as tx:
        assert tx.is_tombstoned(SCOPE_A, ["sha256:t"]) and tx.is_tombstoned(SCOPE_A, ["sha256:u", "fp1:x"])
        assert not tx.is_tombstoned(SCOPE_B, ["sha256:t", "fp1:x"])
        assert not tx.is_tombstoned(SCOPE_A, ["sha256:u"]) and not tx.is_tombstoned(SCOPE_A, [])


def test_idempotency_rows_round_trip_and_a_key_is_taken_once(store: Store) -> None:
    row = idempotency(SCOPE_A, "key-0000000000000001", response={"status": "ok", "text": "é", "n": [1, 2]})
    with store.write() as tx:
        tx.put_idempotency(row)
    with store.read() as tx:
        assert tx.get_idempotency(SCOPE_A, "alice", "key-0000000000000001") == row
        assert tx.get_idempotency(SCOPE_A, "bob", "key-0000000000000001") is None
        assert tx.get_idempotency(SCOPE_B, "alice", "key-0000000000000001") is None
    with pytest.raises(ContractError) as raised, store.write() as tx:
        tx.put_idempotency(idempotency(SCOPE_A, "key-0000000000000001"))
    assert raised.value.code is ErrorCode.STORE_UNAVAILABLE


def test_confirmations_round_trip_and_are_found_by_operation(store: Store) -> None:
    first = confirmation(SCOPE_A, "conf_1")
    other = confirmation(SCOPE_B, "conf_2", requested_at_ms=AT_MS + 1)
    with store.write() as tx:
        tx.insert_confirmation(first)
        tx.insert_confirmation(other)
    with store.read() as tx:
        assert tx.find_confirmations(SCOPE_A, "alice", first.tool, first.target, first.operation_digest) == [first]
        assert tx.find_confirmations(SCOPE_A2, "alice", first.tool, first.target, first.operation_digest) == []
        assert tx.get_confirmation("conf_2") == other
        assert tx.list_confirmations(None) == [first, other]
        assert tx.list_confirmations(["approved"]) == []
    approved = confirmation(
        SCOPE_A, "conf_1", status="approved", decided_at_ms=AT_MS + 2, decided_by="host:x", approval_expires_at_ms=9
    )
    with store.write() as tx:
        tx.save_confirmation(approved)
    with store.read() as tx:
        assert tx.list_confirmations(["approved", "denied"]) == [approved]


def test_audit_rows_come_back_in_order_within_the_time_bounds(store: Store) -> None:
    with store.write() as tx:
        tx.append_audit(audit("aud_1", AT_MS))
        tx.append_audit(audit("aud_2", AT_MS + 10, None))
        tx.append_audit(audit("aud_3", AT_MS + 20, SCOPE_B))
    with store.read() as tx:
        assert [row.audit_id for row in tx.audit_rows(None, None)] == ["aud_1", "aud_2", "aud_3"]
        assert [row.audit_id for row in tx.audit_rows(AT_MS + 10, None)] == ["aud_2", "aud_3"]
        assert [row.audit_id for row in tx.audit_rows(None, AT_MS + 20)] == ["aud_1", "aud_2"]
        assert [row.audit_id for row in tx.audit_rows(AT_MS + 1, AT_MS + 11)] == ["aud_2"]
        assert next(iter(tx.audit_rows(None, None))) == audit("aud_1", AT_MS)


# -- host paths: review, maintenance, operations ---------------------------------------------------------


def test_review_queue_and_the_recorded_admission_answers(store: Store) -> None:
    waiting = candidate(SCOPE_B, "cand_wait", adjudication=True, captured_at_ms=AT_MS + 1)
    unsent = candidate(SCOPE_A, "cand_unsent", captured_at_ms=AT_MS)
    pending_answer = {"outcome": {"status": "pending_adjudication", "candidate_id": "cand_wait"}, "replayed": False}
    with store.write() as tx:
        tx.insert_candidate(waiting)
        tx.insert_candidate(unsent)
        tx.insert_candidate(candidate(SCOPE_A, "cand_done", state="rejected", adjudication=True))
        for key, answer in (("key-000000000000000a", pending_answer), ("key-000000000000000b", {"outcome": {}})):
            tx.put_idempotency(
                idempotency(SCOPE_B, key, tool="engram_memory_request_admission", target="cand_wait", response=answer)
            )
    with store.read() as tx:
        assert tx.list_review_queue(include_unsent=False, limit=10) == [waiting]
        assert tx.list_review_queue(include_unsent=True, limit=10) == [unsent, waiting]
        assert tx.list_review_queue(include_unsent=True, limit=1) == [unsent]
        answers = tx.pending_admission_answers(SCOPE_B, "cand_wait")
        assert [row.key for row in answers] == ["key-000000000000000a"]
        assert tx.pending_admission_answers(SCOPE_A, "cand_wait") == []
    decided = {"outcome": {"status": "accepted", "record_id": "mem_1"}, "replayed": False}
    with store.write() as tx:
        tx.rewrite_admission_answer(SCOPE_B, "alice", "key-000000000000000a", decided)
    with store.read() as tx:
        row = tx.get_idempotency(SCOPE_B, "alice", "key-000000000000000a")
        assert row is not None and row.response == decided
    with pytest.raises(ContractError), store.write() as tx:
        tx.rewrite_admission_answer(SCOPE_A, "alice", "key-000000000000000a", decided)


def test_maintenance_lookups_span_scopes_only_where_the_host_asks(store: Store) -> None:
    with store.write() as tx:
        event(tx, SCOPE_A)
        ev = event(tx, SCOPE_A, journal.RECORD_TRANSITIONED, record_id="mem_1", operation="dispute")
        event(tx, SCOPE_A, journal.RECORD_TRANSITIONED, record_id="mem_2", operation="dispute")
        tx.insert_record(record(SCOPE_A, "mem_1", expires_at_ms=AT_MS + 5))
        tx.insert_record(record(SCOPE_A, "mem_2", state="historical", expires_at_ms=AT_MS + 1))
        tx.insert_record(record(SCOPE_B, "mem_3"))
        tx.set_superseded_by(SCOPE_A, "mem_2", "mem_1")
    with store.read() as tx:
        found = tx.find_record("mem_3")
        assert found is not None and found.scope == SCOPE_B
        assert tx.records_superseded_by(SCOPE_A, "mem_1") == ["mem_2"]
        assert tx.records_superseded_by(SCOPE_B, "mem_1") == []
        due = tx.records_due_for_expiry(AT_MS + 5, ["accepted_current", "historical"], 10)
        assert [row.record_id for row in due] == ["mem_2", "mem_1"]
        assert [row.record_id for row in tx.records_due_for_expiry(AT_MS + 5, ["accepted_current"], 10)] == ["mem_1"]
        assert [row.record_id for row in tx.list_records(RecordFilter())] == ["mem_1", "mem_2", "mem_3"]
        assert [row.record_id for row in tx.list_records(RecordFilter(tenant="tenant-b"))] == ["mem_3"]
        assert [row.record_id for row in tx.list_records(RecordFilter(state="historical", limit=1))] == ["mem_2"]
        history = tx.record_history(SCOPE_A, "mem_1", [journal.RECORD_TRANSITIONED])
        assert history == [ev]


def test_operations_read_raw_rows_states_and_counts(store: Store) -> None:
    with store.write() as tx:
        first = event(tx, SCOPE_A)
        event(tx, SCOPE_B)
        tx.insert_candidate(candidate(SCOPE_A, "cand_1", adjudication=True))
        tx.put_body(SCOPE_A, "cand_1", SealedBody(b"n" * 12, b"c"))
        indexed(tx, SCOPE_A, "mem_1", primary="word")
        tx.insert_record(record(SCOPE_A, "mem_2", state="historical"))
    with store.read() as tx:
        assert tx.scope_names() == [(b"tenant-a", b"workspace-1"), (b"tenant-b", b"workspace-1")]
        raw = next(iter(tx.journal_rows(SCOPE_A)))
        assert (raw.tenant, raw.cursor, raw.event_id, raw.event_digest) == (
            b"tenant-a",
            1,
            first.event_id.encode(),
            first.event_digest.encode(),
        )
        assert raw.affects_records == 0 and isinstance(raw.at_ms, int) and raw.body is not None
        assert [(c.candidate_id, c.state, c.adjudication) for c in tx.candidate_states(SCOPE_A)] == [
            ("cand_1", "pending", True)
        ]
        assert tx.record_states(SCOPE_A) == {"mem_1": "accepted_current", "mem_2": "historical"}
        assert tx.body_owners(SCOPE_A) == {"cand_1"} and tx.body_owners(SCOPE_B) == set()
        entries = tx.index_entries(SCOPE_A)
        assert [(e.record_id, e.record_scope, dict(e.fields)) for e in entries] == [
            ("mem_1", SCOPE_A, fields(primary="word"))
        ]
        assert tx.index_entries(SCOPE_B) == []
        assert tx.index_row_count() == 1
        assert {(c.scope, c.state, c.count) for c in tx.record_state_counts()} == {
            (SCOPE_A, "accepted_current", 1),
            (SCOPE_A, "historical", 1),
        }
        assert [(c.scope, c.state, c.count, c.adjudication) for c in tx.candidate_state_counts()] == [
            (SCOPE_A, "pending", 1, True)
        ]
        assert tx.journal_event_counts() == {SCOPE_A: 1, SCOPE_B: 1}
        assert tx.indexed_counts() == {SCOPE_A: 1}
        assert tx.any_journal()  # type: ignore[attr-defined]
    with store.write() as tx:
        assert tx.index_integrity_ok()


def test_erasing_physically_succeeds_for_the_owner(store: Store) -> None:
    with store.write() as tx:
        event(tx, SCOPE_A)
        indexed(tx, SCOPE_A, "mem_1", primary="secretish")
        tx.put_body(SCOPE_A, "mem_1", SealedBody(b"n" * 12, b"c"))
    with store.write() as tx:
        tx.unindex_record(SCOPE_A, "mem_1")
        tx.purge_index()
        tx.destroy_body(SCOPE_A, "mem_1")
    assert store.erase_physically(now=True)
    with store.read() as tx:
        assert tx.index_row_count() == 0


def test_index_names_itself_for_rank_receipts(store: Store) -> None:
    assert store.index_name in {"sqlite-fts5", "postgresql-tsvector"}


def test_every_field_is_returned_by_index_entries(store: Store) -> None:
    texts = {name: f"{name}word {name}other" for name in FIELDS}
    with store.write() as tx:
        event(tx, SCOPE_A)
        indexed(tx, SCOPE_A, "mem_1", **texts)
    with store.read() as tx:
        assert dict(tx.index_entries(SCOPE_A)[0].fields) == texts
        assert new_id("x") != new_id("x")


# -- semantic index ---------------------------------------------------------------------------------


def _vector_ids(store: Store, scope: object, model: str) -> list[str]:
    assert isinstance(scope, type(SCOPE_A))
    with store.read() as tx:
        return [row.record_id for row in tx.vectors(scope, model)]


def test_a_vector_is_kept_only_for_an_accepted_current_record_and_only_once_per_model(store: Store) -> None:
    with store.write() as tx:
        event(tx, SCOPE_A)
        indexed(tx, SCOPE_A, "mem_current", primary="a")
        tx.insert_record(record(SCOPE_A, "mem_disputed", state="accepted_disputed"))
        assert tx.put_vector(SCOPE_A, "mem_current", "model-1", b"\x00" * 8, "a")
        assert not tx.put_vector(SCOPE_A, "mem_current", "model-1", b"\x01" * 8, "a")  # the first one stays
        assert not tx.put_vector(SCOPE_A, "mem_disputed", "model-1", b"\x00" * 8, "a")
        assert not tx.put_vector(SCOPE_A, "mem_missing", "model-1", b"\x00" * 8, "a")
        assert not tx.put_vector(SCOPE_B, "mem_current", "model-1", b"\x00" * 8, "a")  # another tenant's id
    with store.read() as tx:
        (kept,) = tx.vectors(SCOPE_A, "model-1")
        assert (kept.record_id, kept.vector) == ("mem_current", b"\x00" * 8)
        assert tx.records_without_vector(SCOPE_A, ["model-1"]) == []
        assert [row.record_id for row in tx.records_without_vector(SCOPE_A, ["model-2"])] == ["mem_current"]
        assert tx.records_without_vector(SCOPE_B, ["model-1"]) == []
        assert tx.records_without_vector(SCOPE_A, ["model-2", "model-1"]) == []  # any of them will do


def test_a_vector_of_another_model_gives_way(store: Store) -> None:
    with store.write() as tx:
        event(tx, SCOPE_A)
        indexed(tx, SCOPE_A, "mem_one", primary="a")
        indexed(tx, SCOPE_A, "mem_two", primary="b")
        tx.put_vector(SCOPE_A, "mem_one", "retired", b"\x00" * 8, "a")
        tx.put_vector(SCOPE_A, "mem_two", "retired", b"\x00" * 8, "b")
    with store.read() as tx:
        missing = tx.records_without_vector(SCOPE_A, ["current"])
    assert [(row.record_id, row.valid_from_ms, row.valid_to_ms) for row in missing] == [
        ("mem_one", AT_MS, None),
        ("mem_two", AT_MS, None),
    ]
    with store.write() as tx:
        assert tx.put_vector(SCOPE_A, "mem_one", "current", b"\x02" * 8, "a")
    assert _vector_ids(store, SCOPE_A, "current") == ["mem_one"]
    assert _vector_ids(store, SCOPE_A, "retired") == ["mem_two"]


def test_an_unsynced_write_commits_like_any_other(store: Store) -> None:
    with store.write(synced=False) as tx:
        tx.append_audit(audit("aud_unsynced", AT_MS))
    with pytest.raises(RuntimeError), store.write(synced=False) as tx:
        tx.append_audit(audit("aud_rolled_back", AT_MS))
        raise RuntimeError("the body failed")
    with store.write() as tx:  # the connection is back to synced commits and still usable
        tx.append_audit(audit("aud_synced", AT_MS))
    with store.read() as tx:
        kept = {row.audit_id for row in tx.audit_rows(None, None)}
    assert {"aud_unsynced", "aud_synced"} <= kept and "aud_rolled_back" not in kept
