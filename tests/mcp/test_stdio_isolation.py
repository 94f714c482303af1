"""SPEC §2 isolation: another tenant (or another workspace of the same tenant) learns nothing from known ids.

Known ids of alice's tenant-a/workspace-1 must answer exactly like ids nobody issued (same envelope minus
auditId), every action on them must be a no-op, and no confirmation request may be left behind.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from tests.mcp.helpers import (
    ADMIT,
    FORGET,
    GET,
    WITHDRAW,
    Pool,
    assert_failure,
    capture,
    confirmation_rows,
    db_count,
    forget_args,
    found_ids,
    get,
    ok_value,
    remember,
    search,
    shaped_like,
    unique_word,
    withdraw_args,
    without_audit,
)
from tests.support.payloads import PURPOSE, unique_key

INTRUDERS = ["tenant_b", "workspace_2"]


@dataclass(frozen=True)
class Owned:
    word: str
    pending_candidate: str
    accepted_candidate: str
    record_id: str


@pytest.fixture(scope="module")
def owned(pool: Pool) -> Owned:
    """Alice's pending candidate and accepted record, all holding one unique word."""
    alice = pool.agent("alice")
    word = unique_word("isolated")
    pending = capture(alice, f"The {word} draft stays pending.")
    accepted_candidate, record_id = remember(alice, f"The {word} record is admitted.")
    return Owned(word, pending["candidate_id"], accepted_candidate, record_id)


@pytest.fixture(autouse=True)
def nothing_left_behind(pool: Pool, owned: Owned) -> Iterator[None]:
    """After every test here: alice's things are untouched and no request names them for anyone else."""
    yield
    alice = pool.agent("alice")
    assert found_ids(alice, owned.word) == [owned.record_id]
    assert ok_value(get(alice, owned.record_id))["record"]["state"] == "accepted_current"
    rows = confirmation_rows(pool.paths, {owned.pending_candidate, owned.record_id, owned.accepted_candidate})
    assert [row for row in rows if row.scope.tenant != "tenant-a" or row.scope.workspace != "workspace-1"] == []


def _same(known: dict[str, Any], unknown: dict[str, Any]) -> None:
    assert without_audit(known) == without_audit(unknown)
    assert known["auditId"] != unknown["auditId"]


@pytest.mark.parametrize("intruder", INTRUDERS)
def test_isolation_search_finds_nothing(pool: Pool, owned: Owned, intruder: str) -> None:
    value = ok_value(search(pool.agent(intruder), owned.word))
    assert value["records"] == []
    assert value["rank_receipt"]["candidate_count"] == 0
    assert "next_page_cursor" not in value


@pytest.mark.parametrize("intruder", INTRUDERS)
def test_isolation_search_matches_unknown_word_answer(pool: Pool, owned: Owned, intruder: str) -> None:
    agent = pool.agent(intruder)
    known = ok_value(search(agent, owned.word))
    unknown = ok_value(search(agent, unique_word("isolated")))
    assert known["records"] == unknown["records"] == []
    assert known["rank_receipt"]["candidate_count"] == unknown["rank_receipt"]["candidate_count"] == 0
    assert known["rank_receipt"]["ordered_ids_digest"] == unknown["rank_receipt"]["ordered_ids_digest"]


@pytest.mark.parametrize("intruder", INTRUDERS)
def test_isolation_get_known_record_same_as_unknown(pool: Pool, owned: Owned, intruder: str) -> None:
    agent = pool.agent(intruder)
    known = agent.call(GET, {"record_id": owned.record_id, "purpose_ref": PURPOSE})
    unknown = agent.call(GET, {"record_id": shaped_like(owned.record_id), "purpose_ref": PURPOSE})
    assert_failure(known, "NOT_FOUND")
    _same(known, unknown)


@pytest.mark.parametrize("intruder", INTRUDERS)
@pytest.mark.parametrize("which", ["pending", "accepted"])
def test_isolation_request_admission_known_candidate_same_as_unknown(
    pool: Pool, owned: Owned, intruder: str, which: str
) -> None:
    agent = pool.agent(intruder)
    target = owned.pending_candidate if which == "pending" else owned.accepted_candidate
    journal = db_count(pool.paths, "journal")
    known = agent.call(ADMIT, {"candidate_id": target, "idempotency_key": unique_key("intrude")})
    unknown = agent.call(ADMIT, {"candidate_id": shaped_like(target), "idempotency_key": unique_key("intrude")})
    assert_failure(known, "NOT_FOUND")
    _same(known, unknown)
    assert db_count(pool.paths, "journal") == journal


@pytest.mark.parametrize("intruder", INTRUDERS)
@pytest.mark.parametrize("which", ["pending", "accepted"])
def test_isolation_withdraw_known_candidate_same_as_unknown(
    pool: Pool, owned: Owned, intruder: str, which: str
) -> None:
    agent = pool.agent(intruder)
    target = owned.pending_candidate if which == "pending" else owned.accepted_candidate
    decoy = shaped_like(target)
    requests = db_count(pool.paths, "confirmations")
    known = agent.call(WITHDRAW, withdraw_args(target))
    unknown = agent.call(WITHDRAW, withdraw_args(decoy))
    assert_failure(known, "NOT_FOUND")
    _same(known, unknown)
    assert db_count(pool.paths, "confirmations") == requests
    assert confirmation_rows(pool.paths, {target, decoy}) == []


@pytest.mark.parametrize("intruder", INTRUDERS)
def test_isolation_forget_known_record_same_as_unknown(pool: Pool, owned: Owned, intruder: str) -> None:
    agent = pool.agent(intruder)
    decoy = shaped_like(owned.record_id)
    requests = db_count(pool.paths, "confirmations")
    known = agent.call(FORGET, forget_args(owned.record_id))
    unknown = agent.call(FORGET, forget_args(decoy))
    assert_failure(known, "NOT_FOUND")
    _same(known, unknown)
    assert db_count(pool.paths, "confirmations") == requests
    assert confirmation_rows(pool.paths, {owned.record_id, decoy}) == []


@pytest.mark.parametrize("intruder", INTRUDERS)
def test_isolation_page_cursor_from_owner_is_stale(pool: Pool, intruder: str) -> None:
    alice = pool.agent("alice")
    topic = unique_word("crosscursor")
    for _ in range(3):
        remember(alice, f"The {topic} item {unique_word()}.")
    cursor = ok_value(search(alice, topic, limit=1))["next_page_cursor"]
    envelope = search(pool.agent(intruder), topic, limit=1, page_cursor=cursor)
    assert_failure(envelope, "STALE_PAGE")


@pytest.mark.parametrize("intruder", INTRUDERS)
def test_isolation_identical_content_is_not_a_duplicate_across_scopes(pool: Pool, intruder: str) -> None:
    text = f"The {unique_word('samefact')} fact exists in two scopes."
    _, alice_record = remember(pool.agent("alice"), text)
    agent = pool.agent(intruder)
    pending = capture(agent, text)
    outcome = ok_value(agent.call(ADMIT, {"candidate_id": pending["candidate_id"], "idempotency_key": unique_key("x")}))
    assert outcome["outcome"]["status"] == "accepted"
    assert outcome["outcome"]["record_id"] != alice_record


@pytest.mark.parametrize("intruder", INTRUDERS)
def test_isolation_same_idempotency_key_in_other_scope_is_independent(pool: Pool, owned: Owned, intruder: str) -> None:
    key = unique_key("scoped")
    alice_pending = capture(pool.agent("alice"), f"Scoped key {unique_word()}.", key=key)
    other = capture(pool.agent(intruder), f"Other scope {unique_word()}.", key=key)
    assert other["status"] == "committed_pending"
    assert other["candidate_id"] != alice_pending["candidate_id"]
