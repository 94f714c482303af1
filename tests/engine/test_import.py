"""The host's import: captures and their admissions as the agent calls would make them, sharing one commit.

Every test runs on both stores (PostgreSQL commits each write alone: the results must be the same).
The lost commit cannot be caused on demand; that test says so.
"""

from __future__ import annotations

import pytest

from engram_memory.contract.errors import ContractError
from engram_memory.engine.engine import Engine
from engram_memory.host.settings import HostPaths
from tests.support.clocks import ManualClock
from tests.support.engines import steered_engine
from tests.support.faults import NOT_COMMITTED, commit_fault
from tests.support.homes import bind
from tests.support.inprocess import InProcessAgent
from tests.support.payloads import capture_args
from tests.support.raw import raw_store, raw_vault

SECRET = "AKIA" + "IOSFODNN7EXAMPLE"


def _items(texts: list[str], prefix: str = "import") -> list[tuple[dict[str, object], str]]:
    return [
        (capture_args(text, key=f"{prefix}-capture-{n:06d}"), f"{prefix}-admission-{n:06d}")
        for n, text in enumerate(texts)
    ]


def test_imported_memories_are_records_found_by_search(paths: HostPaths, steered: Engine) -> None:
    binding = bind(paths).binding
    texts = [f"Import note {n}: the ferry to Aland leaves at {n + 6} o'clock." for n in range(30)]
    outcomes = steered.import_memories(binding, _items(texts))
    assert [o.captured["output"]["value"]["status"] for o in outcomes] == ["committed_pending"] * 30
    records = []
    for outcome in outcomes:
        assert outcome.admitted is not None
        assert outcome.admitted["output"]["value"]["outcome"]["status"] == "accepted"
        records.append(outcome.admitted["output"]["value"]["outcome"]["record_id"])
    agent = InProcessAgent(steered, binding)
    assert records[7] in agent.found_ids("ferry Aland 13 o'clock")
    assert agent.get(records[29])["output"]["value"]["record"]["components"][0]["text"] == texts[29]
    with raw_store(paths) as db:
        assert db.count("records") == 30
        assert db.count("candidates", "state = 'accepted_current'") == 30
        # Two calls of each item, each audited as from an agent (then the search and the get).
        assert db.count("audit_log", "tool IN ('engram_memory_capture', 'engram_memory_request_admission')") == 60


def test_an_import_replays_like_the_calls_it_stands_for(paths: HostPaths, steered: Engine) -> None:
    binding = bind(paths).binding
    items = _items(["The staging database moved to the eu-north region."])
    first = steered.import_memories(binding, items)[0]
    again = steered.import_memories(binding, items)[0]
    assert again.captured["output"]["value"]["status"] == "duplicate_exact"
    assert again.admitted is not None and first.admitted is not None
    assert again.admitted["output"]["value"]["replayed"] is True
    assert again.admitted["output"]["value"]["outcome"] == first.admitted["output"]["value"]["outcome"]
    with raw_store(paths) as db:
        assert db.count("records") == 1


def test_a_bad_item_fails_alone(paths: HostPaths, steered: Engine) -> None:
    binding = bind(paths).binding
    items = _items(["Before the bad one.", "", "After the bad one.", f"The key is {SECRET} for prod."])
    outcomes = steered.import_memories(binding, items)
    assert outcomes[1].captured["error"]["code"] == "INVALID_SCHEMA" and outcomes[1].admitted is None
    statuses = [o.admitted["output"]["value"]["outcome"]["status"] if o.admitted else None for o in outcomes]
    assert statuses == ["accepted", None, "accepted", "rejected"]
    rejected = outcomes[3].captured["output"]["value"]["candidate_id"]
    admitted = [o.captured["output"]["value"]["candidate_id"] for o in (outcomes[0], outcomes[2])]
    with raw_vault(paths) as vault:
        # Decided candidates' keys are gone once the import returns: the rejected one's for good.
        for candidate_id in [rejected, *admitted]:
            assert vault.count("data_keys", "owner_id = ?", (candidate_id,)) == 0
        assert vault.count("shredded", "owner_id = ?", (rejected,)) == 1
    with raw_store(paths) as db:
        assert db.count("records") == 2


def test_an_import_inside_a_batch_reads_its_own_writes(paths: HostPaths, steered: Engine) -> None:
    """The second capture of the same content is an exact duplicate of the first, admitted just before it
    in the same import."""
    binding = bind(paths).binding
    text = "The on-call rotation changes every Monday at nine."
    items = [
        (capture_args(text, key="dup-capture-000001"), "dup-admission-000001"),
        (capture_args(text, key="dup-capture-000002"), "dup-admission-000002"),
    ]
    outcomes = steered.import_memories(binding, items)
    statuses = [o.admitted["output"]["value"]["outcome"]["status"] for o in outcomes if o.admitted]
    assert statuses == ["accepted", "duplicate_exact"]


def test_a_lost_batch_commit_is_an_unknown_outcome_and_the_import_can_be_sent_again_simulated(
    paths: HostPaths,
) -> None:
    store = commit_fault(paths, NOT_COMMITTED)
    with steered_engine(paths, clock=ManualClock(), store=store, semantic=False) as engine:
        binding = bind(paths).binding
        items = _items([f"Lost-commit note {n} about the harbour crane." for n in range(5)])
        store.armed = True
        with pytest.raises(ContractError) as raised:
            engine.import_memories(binding, items)
        assert raised.value.code.value == "MUTATION_OUTCOME_UNKNOWN"
        with raw_store(paths) as db:
            assert db.count("records") == 0 and db.count("candidates") == 0
        outcomes = engine.import_memories(binding, items)
        statuses = [o.admitted["output"]["value"]["outcome"]["status"] for o in outcomes if o.admitted]
        assert statuses == ["accepted"] * 5
        with raw_store(paths) as db:
            assert db.count("records") == 5


def test_an_import_without_a_readable_policy_reports_it_for_each_item(paths: HostPaths, steered: Engine) -> None:
    binding = bind(paths).binding
    paths.policy.write_text("this is not = = toml", encoding="utf-8")
    outcomes = steered.import_memories(binding, _items(["One.", "Two."]))
    assert [o.captured["error"]["code"] for o in outcomes] == ["POLICY_UNAVAILABLE"] * 2
    with raw_store(paths) as db:
        assert db.count("candidates") == 0
