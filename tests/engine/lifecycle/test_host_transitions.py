"""Host lifecycle maintenance: every legal transition through the engine, every refusal writing
nothing, the supersede/rewind swap, tombstone's erasure, automatic expiry, and stale page cursors."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import Any

import pytest

from engram_memory.contract.instants import format_instant
from engram_memory.contract.states import RecordState
from engram_memory.engine import journal
from engram_memory.engine.engine import Engine
from engram_memory.engine.lifecycle import host_transitions as maintenance
from engram_memory.engine.lifecycle.host_transitions import AUTO_EXPIRY_ACTOR, MaintenanceOutcome, MaintenanceRefused
from engram_memory.engine.ports.store import Scope
from engram_memory.host.settings import HostPaths
from tests.support.clocks import ManualClock
from tests.support.homes import bind
from tests.support.inprocess import InProcessAgent
from tests.support.payloads import PURPOSE
from tests.support.raw import RawDb, raw_store, readable_in_store

SCOPE = Scope(tenant="tenant-a", workspace="workspace-1")
HOST = "host:tester"
Op = Callable[[Engine, str, str], MaintenanceOutcome]

# name -> how the host calls it; the third argument is a current successor in the same scope.
OPS: dict[str, Op] = {
    "dispute": lambda e, r, _s: maintenance.dispute(e.deps, r, decided_by=HOST, reason_ref="ticket:1"),
    "resolve_current": lambda e, r, _s: maintenance.resolve(
        e.deps, r, to_state=RecordState.ACCEPTED_CURRENT, decided_by=HOST, reason_ref="ticket:1"
    ),
    "resolve_historical": lambda e, r, _s: maintenance.resolve(
        e.deps, r, to_state=RecordState.HISTORICAL, decided_by=HOST, reason_ref="ticket:1"
    ),
    "supersede": lambda e, r, s: maintenance.supersede(
        e.deps, r, successor_id=s, decided_by=HOST, reason_ref="ticket:1"
    ),
    "mark_non_current": lambda e, r, _s: maintenance.mark_non_current(e.deps, r, decided_by=HOST, reason_ref="t:1"),
    "rewind": lambda e, r, _s: maintenance.rewind(e.deps, r, decided_by=HOST, reason_ref="ticket:1"),
    "expire": lambda e, r, _s: maintenance.expire(e.deps, r, decided_by=HOST, reason_ref="ticket:1"),
    "trust_invalidate": lambda e, r, _s: maintenance.trust_invalidate(e.deps, r, decided_by=HOST, reason_ref="t:1"),
    "tombstone": lambda e, r, _s: maintenance.tombstone(e.deps, r, decided_by=HOST, reason_ref="ticket:1"),
}

# SPEC §5, written out again here so that a wrong table in contract/states.py fails these tests.
LIVE = ("accepted_current", "accepted_disputed", "historical", "expired", "trust_invalid")
LEGAL: dict[tuple[str, str], str] = {
    ("dispute", "accepted_current"): "accepted_disputed",
    ("resolve_current", "accepted_disputed"): "accepted_current",
    ("resolve_historical", "accepted_disputed"): "historical",
    ("supersede", "accepted_current"): "historical",
    ("supersede", "accepted_disputed"): "historical",
    ("mark_non_current", "accepted_current"): "historical",
    ("mark_non_current", "accepted_disputed"): "historical",
    ("rewind", "historical"): "accepted_current",
    **{("expire", s): "expired" for s in ("accepted_current", "accepted_disputed", "historical")},
    **{("trust_invalidate", s): "trust_invalid" for s in ("accepted_current", "accepted_disputed", "historical")},
    **{("tombstone", s): "tombstoned" for s in LIVE},
}
# How a fresh accepted_current record is brought into each state first.
REACH: dict[str, list[str]] = {
    "accepted_current": [],
    "accepted_disputed": ["dispute"],
    "historical": ["mark_non_current"],
    "expired": ["expire"],
    "trust_invalid": ["trust_invalidate"],
    "tombstoned": ["tombstone"],
}


def _marker() -> str:
    return "zq" + "".join(secrets.choice("bcdfghjklmnpqrstvwxz") for _ in range(10))


def _record(agent: InProcessAgent, **options: Any) -> tuple[str, str]:
    """A new accepted_current record and the one word that finds it."""
    word = _marker()
    return agent.remember(f"The {word} service rotates its logs nightly.", **options), word


def _in_state(agent: InProcessAgent, steered: Engine, state: str) -> tuple[str, str]:
    record_id, word = _record(agent)
    for name in REACH[state]:
        OPS[name](steered, record_id, "")
    return record_id, word


def _db(paths: HostPaths) -> RawDb:
    return raw_store(paths)


def _state(paths: HostPaths, record_id: str) -> str:
    with _db(paths) as db:
        return str(db.value("SELECT state FROM records WHERE record_id = ?", (record_id,)))


def _indexed(paths: HostPaths, record_id: str) -> bool:
    with _db(paths) as db:
        return bool(
            db.count("lexical_index", f"{db.index_rid} = (SELECT rid FROM records WHERE record_id = ?)", (record_id,))
        )


def _embedded(paths: HostPaths, record_id: str) -> bool:
    with _db(paths) as db:
        return bool(db.count("record_vectors", "rid = (SELECT rid FROM records WHERE record_id = ?)", (record_id,)))


def _snapshot(paths: HostPaths) -> tuple[Any, ...]:
    """Everything a maintenance operation could write."""
    with _db(paths) as db:
        return (
            db.rows("SELECT * FROM scopes ORDER BY tenant, workspace"),
            db.count("journal"),
            db.rows("SELECT record_id, state, state_cursor, superseded_by FROM records ORDER BY rid"),
            db.rows(f"SELECT {db.index_rid} FROM lexical_index ORDER BY {db.index_rid}"),
            db.rows("SELECT rid, model FROM record_vectors ORDER BY rid"),
            db.rows("SELECT owner_id FROM sealed_bodies ORDER BY owner_id"),
            db.rows("SELECT payload_digest FROM tombstones ORDER BY payload_digest"),
        )


def _events(steered: Engine) -> list[journal.JournalEvent]:
    with steered.deps.store.read() as tx:
        return list(tx.events(SCOPE))


def _assert_fold_matches_tables(steered: Engine, paths: HostPaths) -> None:
    events = _events(steered)
    with steered.deps.store.read() as tx:
        head = tx.head(SCOPE)
    assert journal.verify_chain(SCOPE, events) == head
    with _db(paths) as db:
        records = dict(db.rows("SELECT record_id, state FROM records"))
    assert journal.fold(events).records == records


def _refusal(action: Callable[[], object]) -> str:
    with pytest.raises(MaintenanceRefused) as caught:
        action()
    return str(caught.value)


# -- every legal transition -------------------------------------------------------------------


@pytest.mark.parametrize(("name", "from_state"), sorted(LEGAL))
def test_legal_transition_sets_state_index_and_journal(
    name: str, from_state: str, agent: InProcessAgent, steered: Engine, paths: HostPaths
) -> None:
    successor, _ = _record(agent)
    record_id, word = _in_state(agent, steered, from_state)
    assert _state(paths, record_id) == from_state
    outcome = OPS[name](steered, record_id, successor)
    to_state = LEGAL[(name, from_state)]
    assert _state(paths, record_id) == to_state
    assert (outcome.primary.from_state, outcome.primary.to_state) == (from_state, to_state)
    searchable = to_state == "accepted_current"
    assert _indexed(paths, record_id) is searchable
    found = agent.found_ids(word)  # the semantic channel may add neighbours after the exact match
    assert (found[:1] == [record_id]) if searchable else (record_id not in found)
    assert _embedded(paths, record_id) == searchable
    assert (agent.get(record_id)["ok"]) is searchable
    last = _events(steered)[-1]
    assert last.kind == journal.RECORD_TRANSITIONED and last.event_id == outcome.primary.event.event_id
    assert last.body["actor"] == {"principal": HOST, "agent_id": "host", "session": "host"}
    assert last.body["data"]["from_state"] == from_state and last.body["data"]["to_state"] == to_state
    assert last.body["data"]["reason_ref"] in ("ticket:1", "t:1")
    with _db(paths) as db:
        assert db.one("SELECT state_cursor FROM records WHERE record_id = ?", (record_id,)) == (last.cursor,)
    _assert_fold_matches_tables(steered, paths)


@pytest.mark.parametrize("from_state", [*LIVE, "tombstoned"])
def test_illegal_transitions_are_refused_naming_the_code_and_write_nothing(
    from_state: str, agent: InProcessAgent, steered: Engine, paths: HostPaths
) -> None:
    successor, _ = _record(agent)
    record_id, _ = _in_state(agent, steered, from_state)
    illegal = [name for name in OPS if (name, from_state) not in LEGAL]
    assert illegal
    before = _snapshot(paths)
    for name in illegal:
        reason = _refusal(lambda name=name: OPS[name](steered, record_id, successor))
        code = "ALREADY_TERMINAL" if from_state == "tombstoned" else "ILLEGAL_TRANSITION"
        assert reason.startswith(code + ": ") and record_id in reason and "\n" not in reason
        assert _snapshot(paths) == before, name


def test_unknown_record_is_no_such_record(steered: Engine, paths: HostPaths) -> None:
    before = _snapshot(paths)
    for name, op in OPS.items():
        assert _refusal(lambda op=op: op(steered, "mem_nosuchrecord", "")) == "no such record: mem_nosuchrecord", name
    assert _snapshot(paths) == before


def test_reason_ref_must_be_an_opaque_ref(agent: InProcessAgent, steered: Engine, paths: HostPaths) -> None:
    record_id, _ = _record(agent)
    before = _snapshot(paths)
    for bad in ("", "x" * 513, "e\u0301"):
        reason = _refusal(lambda bad=bad: maintenance.dispute(steered.deps, record_id, decided_by=HOST, reason_ref=bad))
        assert reason.startswith("INVALID_SCHEMA: ")
    assert _snapshot(paths) == before
    maintenance.dispute(steered.deps, record_id, decided_by=HOST, reason_ref="é" * 256)
    assert _state(paths, record_id) == "accepted_disputed"


# -- supersede and rewind -----------------------------------------------------------------------


def test_supersede_refuses_a_successor_that_is_itself_not_current_or_elsewhere(
    served: Engine, paths: HostPaths, agent: InProcessAgent, steered: Engine
) -> None:
    record_id, _ = _record(agent)
    disputed, _ = _in_state(agent, steered, "accepted_disputed")
    other_scope = InProcessAgent(served, bind(paths, workspace="workspace-2").binding)
    elsewhere, _ = _record(other_scope)
    before = _snapshot(paths)
    cases = {
        record_id: "cannot be record",
        disputed: "must be accepted_current; it is accepted_disputed",
        elsewhere: "it is in another scope",
        "mem_missing": "it is in no scope",
    }
    for successor, expected in cases.items():
        reason = _refusal(
            lambda s=successor: maintenance.supersede(steered.deps, record_id, successor_id=s, decided_by=HOST)
        )
        assert reason.startswith("ILLEGAL_TRANSITION: ") and expected in reason
    assert _snapshot(paths) == before


def test_rewind_swaps_with_the_current_successor_in_one_transaction(
    agent: InProcessAgent, steered: Engine, paths: HostPaths
) -> None:
    old, old_word = _record(agent)
    new, new_word = _record(agent)
    maintenance.supersede(steered.deps, old, successor_id=new, decided_by=HOST)
    assert old not in agent.found_ids(old_word) and agent.found_ids(new_word)[:1] == [new]
    with _db(paths) as db:
        assert db.one("SELECT superseded_by FROM records WHERE record_id = ?", (old,)) == (new,)
    outcome = maintenance.rewind(steered.deps, old, decided_by=HOST, reason_ref="rollback:7")
    assert [(t.record.record_id, t.to_state) for t in outcome.transitions] == [
        (old, "accepted_current"),
        (new, "historical"),
    ]
    displaced, rewound = sorted(outcome.transitions, key=lambda t: t.event.cursor)
    assert rewound.event.cursor == displaced.event.cursor + 1 and rewound.event.at_ms == displaced.event.at_ms
    assert displaced.event.body["data"]["superseded_by"] == old
    assert rewound.event.body["data"]["replacing"] == new
    assert (_state(paths, old), _state(paths, new)) == ("accepted_current", "historical")
    assert agent.found_ids(old_word)[:1] == [old] and new not in agent.found_ids(new_word)
    with _db(paths) as db:
        links = dict(db.rows("SELECT record_id, superseded_by FROM records WHERE record_id IN (?, ?)", (old, new)))
    assert links == {old: None, new: old}
    # The link now points the other way, so rewinding again swaps them back.
    maintenance.rewind(steered.deps, new, decided_by=HOST)
    assert (_state(paths, old), _state(paths, new)) == ("historical", "accepted_current")
    _assert_fold_matches_tables(steered, paths)


def test_failed_rewind_leaves_no_half_swap(agent: InProcessAgent, steered: Engine, paths: HostPaths) -> None:
    """A real fault after the successor stepped aside: the rewound record's data key is gone."""
    from engram_memory.contract.errors import ContractError, ErrorCode

    old, _ = _record(agent)
    new, new_word = _record(agent)
    maintenance.supersede(steered.deps, old, successor_id=new, decided_by=HOST)
    steered.deps.vault.destroy([old], 0)
    before = _snapshot(paths)
    with pytest.raises(ContractError) as caught:
        maintenance.rewind(steered.deps, old, decided_by=HOST)
    assert caught.value.code is ErrorCode.BLOB_MISSING
    assert _snapshot(paths) == before
    assert agent.found_ids(new_word)[:1] == [new]


def test_rewind_replacing_names_the_record_to_swap_out(
    agent: InProcessAgent, steered: Engine, paths: HostPaths
) -> None:
    old, _ = _record(agent)
    maintenance.mark_non_current(steered.deps, old, decided_by=HOST)
    current, _ = _record(agent)
    bystander, bystander_word = _record(agent)
    outcome = maintenance.rewind(steered.deps, old, replacing=current, decided_by=HOST)
    assert {t.record.record_id: t.to_state for t in outcome.transitions} == {
        old: "accepted_current",
        current: "historical",
    }
    assert agent.found_ids(bystander_word)[:1] == [bystander]
    reason = _refusal(lambda: maintenance.rewind(steered.deps, current, replacing=current, decided_by=HOST))
    assert reason.startswith("ILLEGAL_TRANSITION: ")


def test_rewind_without_a_current_successor_swaps_nothing(
    agent: InProcessAgent, steered: Engine, paths: HostPaths
) -> None:
    old, _ = _record(agent)
    new, _ = _record(agent)
    maintenance.supersede(steered.deps, old, successor_id=new, decided_by=HOST)
    maintenance.dispute(steered.deps, new, decided_by=HOST)
    outcome = maintenance.rewind(steered.deps, old, decided_by=HOST)
    assert len(outcome.transitions) == 1
    assert (_state(paths, old), _state(paths, new)) == ("accepted_current", "accepted_disputed")


# -- tombstone ----------------------------------------------------------------------------------


def test_tombstone_erases_like_forget_and_arms_the_tombstone_guard(
    agent: InProcessAgent, steered: Engine, paths: HostPaths
) -> None:
    word = _marker()
    text = f"The {word} service rotates its logs nightly."
    record_id = agent.remember(text)
    assert readable_in_store(paths, [word]) != []
    outcome = maintenance.tombstone(steered.deps, record_id, decided_by=HOST)
    assert outcome.erasure is not None
    assert outcome.erasure["surfaces"] == {
        "body": "erased",
        "lexical_index": "purged",
        "vectors": "absent",
        "caches": "absent",
        "data_key": "destroyed",
        "shared_vectors": "absent",  # a workspace this small has no shared vector files
    }
    assert outcome.erasure["physical_erasure"] == "complete"
    assert outcome.erasure["coverage_receipt_digest"].startswith("sha256:")
    assert readable_in_store(paths, [word]) == []
    assert steered.deps.vault.get(SCOPE, record_id) is None
    assert steered.deps.vault.shredded([record_id]) == {record_id}
    assert record_id not in agent.found_ids(word) and agent.get(record_id)["error"]["code"] == "NOT_FOUND"
    again = agent.capture(text)
    assert agent.admit(again["candidate_id"])["status"] == "pending_adjudication"
    _assert_fold_matches_tables(steered, paths)


def test_agent_forget_after_host_tombstone_is_already_terminal(agent: InProcessAgent, steered: Engine) -> None:
    record_id, _ = _record(agent)
    maintenance.tombstone(steered.deps, record_id, decided_by=HOST)
    args = {"record_id": record_id, "idempotency_key": "forget-after-host-0001", "reason_ref": "r"}
    assert agent.error_code("engram_memory_forget", args) == "ALREADY_TERMINAL"


# -- automatic expiry ---------------------------------------------------------------------------


def _expiring(agent: InProcessAgent, clock: ManualClock, after_ms: int) -> tuple[str, str]:
    retention = {"derivative_rule": "make-ineligible", "expires_at": format_instant(clock.now + after_ms)}
    return _record(agent, retention=retention)


def test_expire_due_expires_exactly_the_records_past_their_expiry(
    agent: InProcessAgent, steered: Engine, clock: ManualClock, paths: HostPaths
) -> None:
    soon, soon_word = _expiring(agent, clock, 60_000)
    later, _ = _expiring(agent, clock, 3_600_000)
    forever, forever_word = _record(agent)
    disputed, _ = _expiring(agent, clock, 60_000)
    maintenance.dispute(steered.deps, disputed, decided_by=HOST)
    invalid, _ = _expiring(agent, clock, 60_000)
    maintenance.trust_invalidate(steered.deps, invalid, decided_by=HOST)
    assert maintenance.expire_due(steered.deps, clock.now, 100) == []
    clock.advance(60_000)
    before = len(_events(steered))
    expired = maintenance.expire_due(steered.deps, clock.now, 100)
    assert sorted(t.record.record_id for t in expired) == sorted([soon, disputed])
    assert {_state(paths, r) for r in (soon, disputed)} == {"expired"}
    assert (_state(paths, later), _state(paths, forever), _state(paths, invalid)) == (
        "accepted_current",
        "accepted_current",
        "trust_invalid",
    )
    new_events = _events(steered)[before:]
    assert len(new_events) == 2
    assert {e.body["actor"]["principal"] for e in new_events} == {AUTO_EXPIRY_ACTOR}
    assert {e.body["data"]["expires_at"] for e in new_events} == {format_instant(clock.now)}
    assert not _indexed(paths, soon) and soon not in agent.found_ids(soon_word)
    assert agent.found_ids(forever_word)[:1] == [forever]
    assert maintenance.expire_due(steered.deps, clock.now, 100) == []
    _assert_fold_matches_tables(steered, paths)


def test_expire_due_works_in_batches_up_to_its_limit(
    agent: InProcessAgent, steered: Engine, clock: ManualClock, paths: HostPaths
) -> None:
    ids = [_expiring(agent, clock, 1_000 * (index + 1))[0] for index in range(5)]
    clock.advance(10_000)
    first = maintenance.expire_due(steered.deps, clock.now, 3, batch_size=2)
    assert [t.record.record_id for t in first] == ids[:3]
    rest = maintenance.expire_due(steered.deps, clock.now, 100, batch_size=2)
    assert [t.record.record_id for t in rest] == ids[3:]
    assert {_state(paths, r) for r in ids} == {"expired"}


def test_expire_due_spans_scopes_and_journals_each_in_its_own(
    served: Engine, agent: InProcessAgent, steered: Engine, clock: ManualClock, paths: HostPaths
) -> None:
    other = InProcessAgent(served, bind(paths, tenant="tenant-b").binding)
    here, _ = _expiring(agent, clock, 1_000)
    there, _ = _expiring(other, clock, 1_000)
    clock.advance(1_000)
    expired = maintenance.expire_due(steered.deps, clock.now, 100)
    assert {(t.record.record_id, t.record.scope.tenant) for t in expired} == {(here, "tenant-a"), (there, "tenant-b")}
    with steered.deps.store.read() as tx:
        theirs = list(tx.events(Scope(tenant="tenant-b", workspace="workspace-1")))
    assert journal.fold(theirs).records == {there: "expired"}


# -- page cursors -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(OPS))
def test_page_cursor_goes_stale_after_a_host_transition(
    name: str, agent: InProcessAgent, steered: Engine, paths: HostPaths
) -> None:
    word = _marker()
    for index in range(3):
        agent.remember(f"Shard {index} of the {word} ledger replicates nightly.")
    from_state = next(state for (op, state) in LEGAL if op == name)
    successor, _ = _record(agent)
    target, _ = _in_state(agent, steered, from_state)
    cursor = agent.search(word, limit=1)["next_page_cursor"]
    assert agent.search(word, limit=1, page_cursor=cursor)["records"]  # still good until the state moves
    OPS[name](steered, target, successor)
    envelope = agent.call(
        "engram_memory_search", {"query": word, "purpose_ref": PURPOSE, "limit": 1, "page_cursor": cursor}
    )
    assert envelope["error"]["code"] == "STALE_PAGE"


def test_host_reads_list_and_show_without_text(agent: InProcessAgent, steered: Engine, paths: HostPaths) -> None:
    from engram_memory.engine.ports.maintenance import RecordFilter

    old, _ = _record(agent)
    new, _ = _record(agent)
    maintenance.supersede(steered.deps, old, successor_id=new, decided_by=HOST, reason_ref="ticket:9")
    rows = maintenance.list_records(steered.deps, RecordFilter(state="historical"))
    assert [row.record_id for row in rows] == [old]
    assert len(maintenance.list_records(steered.deps, RecordFilter(tenant="tenant-a", limit=1))) == 1
    assert maintenance.list_records(steered.deps, RecordFilter(workspace="nowhere")) == []
    details = maintenance.show_record(steered.deps, new)
    assert details.supersedes == (old,)
    history = maintenance.show_record(steered.deps, old).history
    assert [event.kind for event in history] == [journal.CANDIDATE_ACCEPTED, journal.RECORD_TRANSITIONED]
    assert history[-1].body["data"]["reason_ref"] == "ticket:9"
    assert _refusal(lambda: maintenance.show_record(steered.deps, "mem_nothing")) == "no such record: mem_nothing"
