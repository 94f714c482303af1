"""The verifier on real stores: a healthy store passes, and each kind of damage is found and named.

Damage is done the way it happens to a database, not through the engine: rows edited or deleted behind the
append-only trigger's back, a table edited, a body or data key or index row gone, on both stores; and, where
only one store has the mechanism, a byte flipped in the SQLite file or a PostgreSQL table the owner cannot read.
"""

from __future__ import annotations

import json
import secrets
import time
import tracemalloc
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest

from engram_memory.contract.errors import ErrorCode
from engram_memory.engine.engine import Engine
from engram_memory.engine.ports.store import Scope, WrappedKey
from engram_memory.engine.verify import ORPHAN_KEY_AGE_MS, VerifyReport, problems_json, verify_store
from engram_memory.host.compose import open_vault
from engram_memory.host.settings import HostPaths
from engram_memory.stores.postgres.lexemes import index_tsvector, scope_token
from tests.support.clocks import ManualClock
from tests.support.engines import steered_engine
from tests.support.faults import impatient_store, write_lock_held
from tests.support.homes import bind, engine_for
from tests.support.inprocess import InProcessAgent
from tests.support.payloads import unique_key
from tests.support.postgres import OWNER_ROLE
from tests.support.raw import RawDb, raw_store

SCOPE = Scope(tenant="tenant-a", workspace="workspace-1")
KEPT_TEXT = "Deploys need two approvals from the platform rota."
FORGOTTEN_TEXT = "The osprey cluster was retired after the migration."
SECRET_TEXT = "token: ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
WORDS = ("Deploys", "approvals", "osprey", "cluster", "ghp_")


@dataclass(frozen=True)
class Session:
    kept: str
    other: str
    forgotten: str
    pending: str
    rejected: str
    withdrawn: str
    in_review: str


def _approve(engine: Engine) -> None:
    engine.approve_confirmation(engine.confirmations()[0][0].confirmation_id, decided_by="host:test", ttl_ms=60_000)


def _populate(paths: HostPaths) -> Session:
    """Every lifecycle path once, in tenant-a/workspace-1, plus one record in a second scope; engine closed after."""
    with steered_engine(paths, clock=ManualClock()) as engine:
        agent = InProcessAgent(engine, bind(paths).binding)
        kept = agent.remember(KEPT_TEXT)
        forgotten = agent.remember(FORGOTTEN_TEXT)
        rejected = agent.capture(SECRET_TEXT)["candidate_id"]
        assert agent.admit(rejected)["status"] == "rejected"
        withdrawn = agent.capture("A draft that goes away again.")["candidate_id"]
        args = {"candidate_id": withdrawn, "idempotency_key": unique_key("w"), "reason_ref": "reason:r"}
        agent.error_code("engram_memory_withdraw", args)
        _approve(engine)
        agent.value("engram_memory_withdraw", args)
        forget = {"record_id": forgotten, "idempotency_key": unique_key("f"), "reason_ref": "reason:r"}
        agent.error_code("engram_memory_forget", forget)
        _approve(engine)
        agent.value("engram_memory_forget", forget)
        in_review = agent.capture(FORGOTTEN_TEXT)["candidate_id"]
        assert agent.admit(in_review)["status"] == "pending_adjudication"
        pending = agent.capture("Still waiting for an admission request.")["candidate_id"]
        other = InProcessAgent(engine, bind(paths, workspace="workspace-2").binding).remember(KEPT_TEXT)
    return Session(kept, other, forgotten, pending, rejected, withdrawn, in_review)


@pytest.fixture
def session(paths: HostPaths) -> Session:
    return _populate(paths)


def _verify(paths: HostPaths, *, full: bool = True) -> VerifyReport:
    with engine_for(paths) as engine:
        report = verify_store(engine.deps, full=full)
    text = json.dumps(problems_json(report))
    assert not any(word in text for word in WORDS), text  # ids and cursors only, never memory text
    return report


def _codes(report: VerifyReport) -> set[ErrorCode]:
    return {problem.code for problem in report.problems}


@pytest.fixture
def db(paths: HostPaths) -> Iterator[RawDb]:
    with raw_store(paths) as connection:
        yield connection


def _rid(db: RawDb, record_id: str) -> int:
    return int(db.value("SELECT rid FROM records WHERE record_id = ?", (record_id,)))


# -- a healthy store ------------------------------------------------------------------------------


@pytest.mark.parametrize("full", [True, False], ids=["full", "quick"])
def test_verify_passes_a_store_that_went_through_every_lifecycle_path(
    session: Session, paths: HostPaths, full: bool
) -> None:
    report = _verify(paths, full=full)
    assert report.problems == []
    assert report.ok and report.first is None
    assert report.scopes == 2
    assert report.events >= 12
    assert report.bodies == 4  # kept, other, pending, in_review
    assert report.opened == (4 if full else 0)
    assert report.indexed == (2 if full else 0)
    assert (report.embedded, report.unembedded) == ((2, 0) if full else (0, 0))
    assert report.warnings == []


def test_verify_passes_an_empty_store(paths: HostPaths) -> None:
    report = _verify(paths)
    assert report.ok and report.scopes == 0 and report.events == 0


# -- the journal ----------------------------------------------------------------------------------


def _event(paths: HostPaths, cursor: int) -> tuple[str, str]:
    with raw_store(paths) as db:
        row = db.one(
            "SELECT event_id, prev_digest FROM journal WHERE tenant = ? AND workspace = ? AND cursor = ?",
            (SCOPE.tenant, SCOPE.workspace, cursor),
        )
    assert row is not None
    return str(row[0]), str(row[1])


def _flip_in_file(paths: HostPaths, needle: bytes, offset: int, replacements: bytes) -> None:
    """Changes one byte of the database file inside the only occurrence of `needle` (all connections closed)."""
    wal = paths.sqlite_file.with_name(paths.sqlite_file.name + "-wal")
    assert not wal.exists() or wal.stat().st_size == 0, "the WAL must be checkpointed into the file first"
    data = bytearray(paths.sqlite_file.read_bytes())
    at = data.find(needle)
    assert at >= 0 and data.find(needle, at + 1) < 0, "the needle must occur exactly once in the file"
    data[at + offset] = next(byte for byte in replacements if byte != data[at + offset])
    paths.sqlite_file.write_bytes(bytes(data))


# Each flip lands inside the body of the journal row at cursor 3 (needle, offset in it, replacement bytes);
# the append-only trigger forbids an UPDATE, so the bytes are changed in the file itself.
FLIPS: dict[str, tuple[Callable[[str, str], bytes], int, bytes]] = {
    "a letter of its event id": (lambda event_id, prev: f'"event_id":"{event_id}"'.encode(), 16, b"23"),
    "a digit of its predecessor's digest": (lambda event_id, prev: f'"prev":"{prev}"'.encode(), 20, b"g"),
    "a byte that is not UTF-8": (lambda event_id, prev: f'"event_id":"{event_id}"'.encode(), 18, b"\xff"),
    "the quote that opens a key": (lambda event_id, prev: f'"event_id":"{event_id}"'.encode(), 0, b"{"),
}


@pytest.mark.parametrize("flip", sorted(FLIPS))
@pytest.mark.parametrize("full", [True, False], ids=["full", "quick"])
def test_verify_names_journal_corrupt_when_one_byte_of_a_journal_row_in_the_sqlite_file_is_flipped(
    sqlite_paths: HostPaths, flip: str, full: bool
) -> None:
    paths = sqlite_paths
    _populate(paths)
    event_id, prev = _event(paths, 3)
    needle, offset, replacements = FLIPS[flip]
    _flip_in_file(paths, needle(event_id, prev), offset, replacements)
    _assert_journal_corrupt_at_cursor_3(_verify(paths, full=full))


# Text edits (the bytes PostgreSQL's text type can hold): the same flips, made by an UPDATE of the body.
EDITS = {name: flip for name, flip in FLIPS.items() if name != "a byte that is not UTF-8"}


@pytest.mark.parametrize("edit", sorted(EDITS))
@pytest.mark.parametrize("full", [True, False], ids=["full", "quick"])
def test_verify_names_journal_corrupt_when_one_character_of_a_journal_body_is_changed(
    session: Session, paths: HostPaths, db: RawDb, edit: str, full: bool
) -> None:
    event_id, prev = _event(paths, 3)
    needle_of, offset, replacements = EDITS[edit]
    needle = needle_of(event_id, prev).decode("utf-8")
    where = "tenant = ? AND workspace = ? AND cursor = 3"
    body = str(db.value(f"SELECT body FROM journal WHERE {where}", (SCOPE.tenant, SCOPE.workspace)))
    at = body.find(needle)
    assert at >= 0 and body.find(needle, at + 1) < 0, "the needle must occur exactly once in the body"
    replacement = next(chr(byte) for byte in replacements if chr(byte) != body[at + offset])
    db.allow_journal_edits()
    db.execute(
        f"UPDATE journal SET body = ? WHERE {where}",
        (body[: at + offset] + replacement + body[at + offset + 1 :], SCOPE.tenant, SCOPE.workspace),
    )
    _assert_journal_corrupt_at_cursor_3(_verify(paths, full=full))


def _assert_journal_corrupt_at_cursor_3(report: VerifyReport) -> None:
    first = report.first
    assert first is not None
    assert first.code is ErrorCode.JOURNAL_CORRUPT
    assert first.scope == SCOPE and first.subject == "cursor 3"
    assert first.detail.startswith("the journal of tenant-a/workspace-1 fails at cursor 3 (")


def test_verify_names_cursor_gap_when_a_journal_row_is_deleted(session: Session, paths: HostPaths, db: RawDb) -> None:
    db.allow_journal_edits()
    db.execute("DELETE FROM journal WHERE tenant = ? AND workspace = ? AND cursor = 4", (SCOPE.tenant, SCOPE.workspace))
    report = _verify(paths, full=False)
    assert report.first is not None and report.first.code is ErrorCode.CURSOR_GAP
    assert report.first.detail == "the journal of tenant-a/workspace-1 has a gap: cursor 5 follows cursor 3"
    assert [p.scope for p in report.problems] == [SCOPE]  # the other scope is fine


def test_verify_names_cursor_gap_when_the_last_journal_row_is_deleted(
    session: Session, paths: HostPaths, db: RawDb
) -> None:
    db.allow_journal_edits()
    db.execute(
        "DELETE FROM journal WHERE tenant = ? AND workspace = ?"
        " AND cursor = (SELECT max(cursor) FROM journal WHERE tenant = ? AND workspace = ?)",
        (SCOPE.tenant, SCOPE.workspace, SCOPE.tenant, SCOPE.workspace),
    )
    report = _verify(paths, full=False)
    assert report.first is not None and report.first.code is ErrorCode.CURSOR_GAP
    assert report.first.subject == "head"


def test_verify_names_journal_corrupt_when_the_head_row_disagrees(
    session: Session, paths: HostPaths, db: RawDb
) -> None:
    db.execute(
        "UPDATE scopes SET head_digest = ? WHERE workspace = 'workspace-2'", ("sha256:" + secrets.token_hex(32),)
    )
    report = _verify(paths, full=False)
    assert [(p.code, p.scope, p.subject) for p in report.problems] == [
        (ErrorCode.JOURNAL_CORRUPT, Scope("tenant-a", "workspace-2"), "head")
    ]


def test_verify_names_journal_corrupt_when_a_record_state_is_edited(
    session: Session, paths: HostPaths, db: RawDb
) -> None:
    db.execute("UPDATE records SET state = 'historical' WHERE record_id = ?", (session.kept,))
    quick = _verify(paths, full=False)
    assert [(p.code, p.subject) for p in quick.problems] == [(ErrorCode.JOURNAL_CORRUPT, session.kept)]
    assert quick.problems[0].detail == (
        f"record {session.kept} is historical in the table of tenant-a/workspace-1 but accepted_current in its journal"
    )
    # The full check also sees that the index still holds a record that is no longer current.
    full = _verify(paths, full=True)
    assert (ErrorCode.PROJECTION_STALE, session.kept) in {(p.code, p.subject) for p in full.problems}


def test_verify_names_journal_corrupt_when_a_review_flag_is_edited(
    session: Session, paths: HostPaths, db: RawDb
) -> None:
    db.execute("UPDATE candidates SET adjudication = 0 WHERE candidate_id = ?", (session.in_review,))
    report = _verify(paths, full=False)
    assert [(p.code, p.subject) for p in report.problems] == [(ErrorCode.JOURNAL_CORRUPT, session.in_review)]


# -- bodies and keys ------------------------------------------------------------------------------


@pytest.mark.parametrize("owner", ["kept", "pending"])
def test_verify_names_blob_missing_when_a_live_body_is_deleted(
    session: Session, paths: HostPaths, db: RawDb, owner: str
) -> None:
    owner_id = getattr(session, owner)
    db.execute("DELETE FROM sealed_bodies WHERE owner_id = ?", (owner_id,))
    report = _verify(paths, full=False)
    assert [(p.code, p.subject) for p in report.problems] == [(ErrorCode.BLOB_MISSING, owner_id)]
    assert "is missing" in report.problems[0].detail


def test_verify_names_a_body_left_for_an_ended_owner(session: Session, paths: HostPaths, db: RawDb) -> None:
    db.execute(
        "INSERT INTO sealed_bodies (owner_id, tenant, workspace, nonce, ciphertext) VALUES (?, ?, ?, ?, ?)",
        (session.forgotten, SCOPE.tenant, SCOPE.workspace, b"\x00", b"\x00"),
    )
    report = _verify(paths, full=False)
    assert [(p.code, p.subject) for p in report.problems] == [(ErrorCode.JOURNAL_CORRUPT, session.forgotten)]
    assert report.problems[0].detail == (
        f"a body is left for the tombstoned record {session.forgotten} in tenant-a/workspace-1"
    )


def test_verify_names_blob_missing_in_full_mode_when_a_data_key_is_destroyed(
    session: Session, paths: HostPaths
) -> None:
    vault = open_vault(paths)
    try:
        assert vault.destroy([session.kept], 1)
    finally:
        vault.close()
    assert _verify(paths, full=False).ok  # the start-up check decrypts nothing
    report = _verify(paths, full=True)
    assert [(p.code, p.subject) for p in report.problems] == [(ErrorCode.BLOB_MISSING, session.kept)]
    assert "missing from the vault" in report.problems[0].detail


def test_verify_names_blob_missing_in_full_mode_when_a_body_does_not_open(
    session: Session, paths: HostPaths, db: RawDb
) -> None:
    ciphertext = bytearray(db.value("SELECT ciphertext FROM sealed_bodies WHERE owner_id = ?", (session.kept,)))
    ciphertext[0] ^= 0x01
    db.execute("UPDATE sealed_bodies SET ciphertext = ? WHERE owner_id = ?", (bytes(ciphertext), session.kept))
    report = _verify(paths, full=True)
    assert [(p.code, p.subject) for p in report.problems] == [(ErrorCode.BLOB_MISSING, session.kept)]
    assert "does not open" in report.problems[0].detail


def test_verify_warns_about_orphaned_data_keys_older_than_an_hour(session: Session, paths: HostPaths) -> None:
    vault = open_vault(paths)
    try:
        key = WrappedKey(kek_id="kek-test", wrapped=b"\x00" * 40)
        vault.put(SCOPE, "cand_orphanedlongago", key, 0)
        vault.put(SCOPE, "cand_orphanedjustnow", key, int(time.time() * 1000) - ORPHAN_KEY_AGE_MS // 2)
    finally:
        vault.close()
    report = _verify(paths, full=True)
    assert report.ok
    assert report.warnings == ["1 orphaned data keys (older than an hour, no body in the store); they open nothing"]


# -- the lexical index ----------------------------------------------------------------------------


def test_verify_names_projection_stale_when_an_index_row_is_dropped(
    session: Session, paths: HostPaths, db: RawDb
) -> None:
    db.execute(f"DELETE FROM lexical_index WHERE {db.index_rid} = ?", (_rid(db, session.kept),))
    assert _verify(paths, full=False).ok  # the start-up check leaves the index to `verify`
    report = _verify(paths, full=True)
    assert _codes(report) == {ErrorCode.PROJECTION_STALE}
    details = [p.detail for p in report.problems]
    assert f"record {session.kept} in tenant-a/workspace-1 is not indexed" in details
    assert any(detail.startswith("the index statistics of tenant-a/workspace-1 are off") for detail in details)
    assert "the lexical index holds 1 rows for 2 accepted_current records" in details


def test_verify_names_projection_stale_for_a_vector_of_a_record_that_is_not_current(
    session: Session, paths: HostPaths, db: RawDb
) -> None:
    vector = db.value("SELECT vector FROM record_vectors WHERE rid = ?", (_rid(db, session.kept),))
    db.execute(
        "INSERT INTO record_vectors (rid, tenant, workspace, model, vector, subject) VALUES (?, ?, ?, 'm', ?, 's')",
        (_rid(db, session.forgotten), SCOPE.tenant, SCOPE.workspace, vector),
    )
    assert _verify(paths, full=False).ok
    report = _verify(paths, full=True)
    assert _codes(report) == {ErrorCode.PROJECTION_STALE}
    assert [p.detail for p in report.problems] == [
        f"record {session.forgotten} in tenant-a/workspace-1 has a vector but is tombstoned"
    ]


def test_verify_counts_current_records_still_waiting_for_a_vector_without_failing(
    session: Session, paths: HostPaths, db: RawDb
) -> None:
    db.execute("DELETE FROM record_vectors WHERE rid = ?", (_rid(db, session.kept),))
    report = _verify(paths, full=True)
    assert report.ok and (report.embedded, report.unembedded) == (1, 1)
    assert problems_json(report)["unembedded"] == 1


def test_verify_names_projection_stale_for_an_index_row_under_no_scope(
    session: Session, paths: HostPaths, db: RawDb
) -> None:
    if db.is_postgres:
        nowhere = Scope("tenant-z", "nowhere")
        token, texts = scope_token(nowhere), ("stray words", "", "", "", "")
        db.execute(
            "INSERT INTO lexical_index (rid, tenant, workspace, scope_token, f_primary, f_decision, f_evidence,"
            " f_context, f_citations, tsv) VALUES (987654, ?, ?, ?, ?, ?, ?, ?, ?, ?::tsvector)",
            (nowhere.tenant, nowhere.workspace, token, *texts, index_tsvector(token, texts)),
        )
    else:
        db.execute("INSERT INTO lexical_index (rowid, scope, f_primary) VALUES (987654, 'snoscope', 'stray words')")
    report = _verify(paths, full=True)
    assert [(p.code, p.detail) for p in report.problems] == [
        (ErrorCode.PROJECTION_STALE, "the lexical index holds 3 rows for 2 accepted_current records")
    ]


def test_verify_names_projection_stale_when_an_index_entry_differs_from_its_body(
    session: Session, paths: HostPaths, db: RawDb
) -> None:
    rid = _rid(db, session.kept)
    # The primary text filed as the decision and back.
    if db.is_postgres:
        db.execute("UPDATE lexical_index SET f_primary = f_decision, f_decision = f_primary WHERE rid = ?", (rid,))
    else:
        row = db.one(
            "SELECT scope, f_primary, f_decision, f_evidence, f_context, f_citations FROM lexical_index"
            " WHERE rowid = ?",
            (rid,),
        )
        assert row is not None
        db.execute("DELETE FROM lexical_index WHERE rowid = ?", (rid,))
        db.execute(
            "INSERT INTO lexical_index (rowid, scope, f_primary, f_decision, f_evidence, f_context, f_citations)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            (rid, row[0], row[2], row[1], *row[3:]),
        )
    report = _verify(paths, full=True)
    assert (ErrorCode.PROJECTION_STALE, session.kept) in {(p.code, p.subject) for p in report.problems}
    assert any("does not match its body" in p.detail for p in report.problems)


def test_verify_names_projection_stale_when_the_index_fails_its_own_check(
    session: Session, paths: HostPaths, db: RawDb
) -> None:
    if db.is_postgres:  # a stored tsvector that is no longer what its tokens give
        db.execute("UPDATE lexical_index SET tsv = 'stray:1A'::tsvector WHERE rid = ?", (_rid(db, session.kept),))
    else:  # FTS5's own bookkeeping of a row's length
        db.execute("DELETE FROM lexical_index_docsize WHERE id = ?", (_rid(db, session.kept),))
    report = _verify(paths, full=True)
    assert (ErrorCode.PROJECTION_STALE, "the full-text index fails its own integrity check") in {
        (p.code, p.detail) for p in report.problems
    }


@pytest.mark.parametrize(
    "damage",
    [
        # one posting of the record lost
        "DELETE FROM lexical_index_postings WHERE (scope_key, term, neg_impact, rid) IN"
        " (SELECT scope_key, term, neg_impact, rid FROM lexical_index_postings WHERE rid = :rid LIMIT 1)",
        # its impacts changed
        "UPDATE lexical_index_postings SET neg_impact = neg_impact - 1 WHERE rid = :rid",
        # a term count off by one
        "UPDATE lexical_index_terms SET docs = docs + 1 WHERE term = (SELECT min(term) FROM lexical_index_terms)",
    ],
    ids=["posting-lost", "impact-changed", "count-off"],
)
def test_verify_names_projection_stale_when_the_postings_disagree_with_the_index(
    sqlite_paths: HostPaths, damage: str
) -> None:
    paths = sqlite_paths
    session = _populate(paths)
    assert _verify(paths, full=True).problems == []
    with raw_store(paths) as db:
        rid = _rid(db, session.kept)
        assert db.count("lexical_index_postings", "rid = ?", (rid,)) > 0
        db.execute(damage.replace(":rid", str(rid)))
    report = _verify(paths, full=True)
    assert (ErrorCode.PROJECTION_STALE, "the full-text index fails its own integrity check") in {
        (p.code, p.detail) for p in report.problems
    }


# -- a damaged file -------------------------------------------------------------------------------


def test_verify_reports_a_malformed_sqlite_journal_page_instead_of_raising(sqlite_paths: HostPaths) -> None:
    paths = sqlite_paths
    _populate(paths)
    with raw_store(paths) as db:
        page_size = int(db.value("PRAGMA page_size"))
        root = int(db.value("SELECT rootpage FROM sqlite_master WHERE name = 'journal'"))
    data = bytearray(paths.sqlite_file.read_bytes())
    start = (root - 1) * page_size
    data[start : start + 12] = b"\xff" * 12  # the b-tree page header: its type byte is now invalid
    paths.sqlite_file.write_bytes(bytes(data))
    report = _verify(paths, full=False)
    first = report.first
    assert first is not None and first.code is ErrorCode.JOURNAL_CORRUPT
    assert first.detail.endswith("cannot be read (the database disk image is malformed)")


def test_verify_reports_an_unreadable_postgres_journal_instead_of_raising(postgres_paths: HostPaths) -> None:
    paths = postgres_paths
    _populate(paths)
    with raw_store(paths) as db:
        db.execute(f"REVOKE SELECT ON journal FROM {OWNER_ROLE}")  # the owner took its own right away
    report = _verify(paths, full=False)
    assert [(p.code, p.scope, p.detail) for p in report.problems] == [
        (ErrorCode.JOURNAL_CORRUPT, None, "the list of scopes cannot be read (unreadable)")  # scopes come from it
    ]


def test_verify_says_the_store_is_busy_while_another_writer_holds_the_lock(
    session: Session, paths: HostPaths, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = impatient_store(paths, monkeypatch)  # the full-text engine's own check needs the write lock
    with steered_engine(paths, clock=ManualClock(), store=store, semantic=False) as engine, write_lock_held(paths):
        report = verify_store(engine.deps, full=True)
    assert [(p.code, p.detail) for p in report.problems] == [
        (ErrorCode.STORE_UNAVAILABLE, "the lexical index cannot be read (the store is busy; try again)")
    ]


def test_verify_reports_a_body_of_the_wrong_type_instead_of_raising(
    session: Session, paths: HostPaths, db: RawDb
) -> None:
    if db.is_postgres:  # a column whose type was changed: every body of every scope now reads as text
        db.execute("ALTER TABLE sealed_bodies ALTER COLUMN ciphertext TYPE text USING encode(ciphertext, 'hex')")
        damaged = ["tenant-a/workspace-1", "tenant-a/workspace-2"]
    else:  # SQLite keeps whatever type a row was given
        db.execute("UPDATE sealed_bodies SET ciphertext = 'now text, not bytes' WHERE owner_id = ?", (session.kept,))
        damaged = ["tenant-a/workspace-1"]
    report = _verify(paths, full=True)
    assert [(p.code, p.detail) for p in report.problems] == [
        (ErrorCode.BLOB_MISSING, f"the sealed bodies of {name} cannot be checked (TypeError)") for name in damaged
    ]


def test_verify_lists_twenty_problems_of_a_kind_then_counts_the_rest(
    session: Session, paths: HostPaths, db: RawDb
) -> None:
    for number in range(25):
        db.execute(
            "INSERT INTO sealed_bodies (owner_id, tenant, workspace, nonce, ciphertext) VALUES (?, ?, ?, ?, ?)",
            (f"cand_stray{number:02d}", SCOPE.tenant, SCOPE.workspace, b"\x00", b"\x00"),
        )
    report = _verify(paths, full=False)
    assert [p.subject for p in report.problems] == [f"cand_stray{n:02d}" for n in range(20)] + ["leftover"]
    assert report.problems[-1].line == (
        "JOURNAL_CORRUPT: 5 more problems of the same kind (leftover) in tenant-a/workspace-1"
    )


def test_verify_reads_a_long_journal_as_it_streams_instead_of_holding_it(paths: HostPaths) -> None:
    """A scope's whole journal in memory cost the verifier (and `serve`'s start) gigabytes at a million
    memories; what it keeps now is the folded state, well under a kilobyte and a half per memory."""
    memories = 1_200
    with steered_engine(paths, clock=ManualClock(), semantic=False) as engine:
        InProcessAgent(engine, bind(paths).binding).remember_many(
            [f"Runbook {n}: the rota hands over on day {n % 7} at {n % 24}:00." for n in range(memories)]
        )
        tracemalloc.start()
        try:
            report = verify_store(engine.deps, full=False)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert report.ok and report.events == 2 * memories
    assert peak < 1_500 * memories, peak
