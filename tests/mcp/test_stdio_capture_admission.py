"""SPEC §4 and §8: capture makes an invisible pending candidate; admission (the host's policy) decides it."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import rfc8785

from engram_memory.host.settings import HostPaths
from tests.mcp.helpers import (
    ADMIT,
    CAPTURE,
    DIGEST_RE,
    GET,
    RECORD_ID_RE,
    Pool,
    admit,
    assert_failure,
    capture,
    forget_now,
    found_ids,
    get,
    ok_value,
    policy_edited,
    policy_with,
    remember,
    unique_word,
    withdraw_now,
)
from tests.support.agents import McpAgent
from tests.support.homes import STORES, home_on
from tests.support.payloads import capture_args, unique_key

AWS_KEY_ID = "AKIA" + "IOSFODNN7EXAMPLE"
GOLDEN_DIGEST = "sha256:df5abcbf1d1091794c1f37efcd89e5f7bd6b91afa631e29f084178d35c55e913"


# The reference design's golden vector (SPEC §3, data/golden-payload.json of the product brief).
GOLDEN_PAYLOAD: dict[str, Any] = {
    "schema_version": 2,
    "scope_ref": "scope:case-7",
    "purpose_ref": "purpose:case",
    "valid_time": {"t": 1755350096789, "t_end": 1755350096789},
    "components": [
        {
            "component_id": "component:decision",
            "kind": "decision",
            "text": "Applied the documented correction.",
            "citation_ids": ["citation:source"],
        }
    ],
    "primary_component_id": "component:decision",
    "primary_event": {"at": 1755350096789, "type_ref": "event:correction-applied", "citation_id": "citation:source"},
    "citations": [
        {
            "citation_id": "citation:source",
            "source_ref": "source:case",
            "locator": {"scheme": "document", "value": "case-7#correction"},
            "content_digest": "sha256:" + "a" * 64,
            "observed_at": "2026-08-16T12:34:56.789Z",
        }
    ],
    "retention": {"derivative_rule": "make-ineligible"},
    "reconciliation": {"family_refs": []},
}


def _instant(delta: timedelta) -> str:
    moment = datetime.now(UTC) + delta
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


# -- capture --------------------------------------------------------------------------------------


def test_capture_committed_pending_shape(alice_modern: McpAgent) -> None:
    value = ok_value(alice_modern.call(CAPTURE, capture_args(f"Shape {unique_word()} of a capture.")))
    assert set(value) == {"status", "candidate_id", "record_digest", "cursor", "transaction_receipt_digest"}
    assert value["status"] == "committed_pending"
    assert isinstance(value["candidate_id"], str) and value["candidate_id"]
    assert not value["candidate_id"].startswith("mem_")
    assert RECORD_ID_RE.fullmatch(value["candidate_id"]) is None
    assert DIGEST_RE.fullmatch(value["record_digest"])
    assert DIGEST_RE.fullmatch(value["transaction_receipt_digest"])
    assert isinstance(value["cursor"], int) and not isinstance(value["cursor"], bool) and value["cursor"] >= 1


def test_capture_cursor_dense_per_scope(alice_modern: McpAgent) -> None:
    first = capture(alice_modern, f"Dense {unique_word()} one.")
    second = capture(alice_modern, f"Dense {unique_word()} two.")
    assert second["cursor"] == first["cursor"] + 1


def test_pending_candidate_not_searchable(alice_modern: McpAgent) -> None:
    word = unique_word("pending")
    capture(alice_modern, f"The {word} decision is still pending.")
    assert found_ids(alice_modern, word) == []


def test_pending_candidate_id_not_a_record_id_for_get(alice_modern: McpAgent) -> None:
    pending = capture(alice_modern, f"Candidate {unique_word()} is no record.")
    assert_failure(get(alice_modern, pending["candidate_id"]), "INVALID_SCHEMA")


def test_candidate_id_forced_into_record_shape_not_found(alice_modern: McpAgent) -> None:
    pending = capture(alice_modern, f"Candidate {unique_word()} forced shape.")
    body = pending["candidate_id"].partition("_")[2]
    assert_failure(get(alice_modern, "mem_" + body), "NOT_FOUND")


# -- admission ------------------------------------------------------------------------------------


def test_admission_accepted_with_record_id(alice_modern: McpAgent) -> None:
    pending = capture(alice_modern, f"Accept {unique_word()} decision with rationale.")
    value = admit(alice_modern, pending["candidate_id"])
    assert set(value) == {"outcome", "replayed"}
    assert value["replayed"] is False
    outcome = value["outcome"]
    assert set(outcome) == {
        "status",
        "candidate_id",
        "record_id",
        "cursor",
        "decision_receipt_digest",
        "transaction_receipt_digest",
    }
    assert outcome["status"] == "accepted"
    assert outcome["candidate_id"] == pending["candidate_id"]
    assert RECORD_ID_RE.fullmatch(outcome["record_id"])
    assert outcome["cursor"] == pending["cursor"] + 1
    assert DIGEST_RE.fullmatch(outcome["decision_receipt_digest"])
    assert DIGEST_RE.fullmatch(outcome["transaction_receipt_digest"])


def test_accepted_record_searchable_and_gettable(alice_modern: McpAgent) -> None:
    word = unique_word("accepted")
    pending = capture(alice_modern, f"The {word} convention is admitted.")
    record_id = admit(alice_modern, pending["candidate_id"])["outcome"]["record_id"]
    assert found_ids(alice_modern, word) == [record_id]
    record = ok_value(get(alice_modern, record_id))["record"]
    assert record["record_id"] == record_id
    assert record["record_digest"] == pending["record_digest"]
    assert record["components"][0]["text"] == f"The {word} convention is admitted."


def test_omitted_retention_defaults_to_make_ineligible(alice_modern: McpAgent) -> None:
    _, record_id = remember(alice_modern, f"Default retention {unique_word()}.")
    assert ok_value(get(alice_modern, record_id))["record"]["retention"] == {"derivative_rule": "make-ineligible"}


def test_identical_content_new_key_duplicate_exact(alice_modern: McpAgent) -> None:
    word = unique_word("twin")
    text = f"The {word} fact is captured twice."
    first = capture(alice_modern, text)
    record_id = admit(alice_modern, first["candidate_id"])["outcome"]["record_id"]
    second = capture(alice_modern, text)
    assert second["candidate_id"] != first["candidate_id"]
    assert second["record_digest"] == first["record_digest"]
    outcome = admit(alice_modern, second["candidate_id"])["outcome"]
    assert outcome["status"] == "duplicate_exact"
    assert outcome["record_id"] == record_id
    assert outcome["candidate_id"] == second["candidate_id"]
    assert found_ids(alice_modern, word) == [record_id]


def test_admission_unknown_candidate_not_found(alice_modern: McpAgent) -> None:
    envelope = alice_modern.call(ADMIT, {"candidate_id": "cand_" + "q" * 26, "idempotency_key": unique_key("admit")})
    assert_failure(envelope, "NOT_FOUND")


def test_admission_rejected_candidate_new_key_already_terminal(alice_modern: McpAgent) -> None:
    pending = capture(alice_modern, f"Deploy key {AWS_KEY_ID} for {unique_word()}.")
    assert admit(alice_modern, pending["candidate_id"])["outcome"]["status"] == "rejected"
    again = alice_modern.call(ADMIT, {"candidate_id": pending["candidate_id"], "idempotency_key": unique_key("again")})
    assert_failure(again, "ALREADY_TERMINAL")


def test_admission_withdrawn_candidate_new_key_already_terminal(pool: Pool, alice_modern: McpAgent) -> None:
    pending = capture(alice_modern, f"Withdrawn {unique_word()} draft.")
    withdraw_now(alice_modern, pool.paths, pending["candidate_id"])
    again = alice_modern.call(ADMIT, {"candidate_id": pending["candidate_id"], "idempotency_key": unique_key("again")})
    assert_failure(again, "ALREADY_TERMINAL")


def test_admission_accepted_candidate_new_key_illegal_transition(alice_modern: McpAgent) -> None:
    candidate_id, _ = remember(alice_modern, f"Admitted once {unique_word()}.")
    again = alice_modern.call(ADMIT, {"candidate_id": candidate_id, "idempotency_key": unique_key("again")})
    assert_failure(again, "ILLEGAL_TRANSITION")


# -- retention and reconciliation -------------------------------------------------------------------


def test_retain_without_host_permission_unauthorized(alice_modern: McpAgent) -> None:
    arguments = capture_args(f"Retain {unique_word()}.", retention={"derivative_rule": "retain"})
    assert_failure(alice_modern.call(CAPTURE, arguments), "UNAUTHORIZED")


def test_expires_at_in_past_invalid_schema(alice_modern: McpAgent) -> None:
    retention = {"derivative_rule": "make-ineligible", "expires_at": _instant(-timedelta(minutes=5))}
    arguments = capture_args(f"Past expiry {unique_word()}.", retention=retention)
    assert_failure(alice_modern.call(CAPTURE, arguments), "INVALID_SCHEMA")


def test_expires_at_beyond_host_cap_unauthorized(alice_modern: McpAgent) -> None:
    retention = {"derivative_rule": "make-ineligible", "expires_at": _instant(timedelta(days=366))}
    arguments = capture_args(f"Far expiry {unique_word()}.", retention=retention)
    assert_failure(alice_modern.call(CAPTURE, arguments), "UNAUTHORIZED")


def test_expires_at_within_cap_kept_on_record(alice_modern: McpAgent) -> None:
    expires_at = _instant(timedelta(days=364))
    retention = {"derivative_rule": "make-ineligible", "expires_at": expires_at}
    _, record_id = remember(alice_modern, f"Near expiry {unique_word()}.", retention=retention)
    assert ok_value(get(alice_modern, record_id))["record"]["retention"] == retention


def test_family_refs_without_consent_unauthorized(alice_modern: McpAgent) -> None:
    arguments = capture_args(f"Family {unique_word()}.", reconciliation={"family_refs": ["family:alpha"]})
    assert_failure(alice_modern.call(CAPTURE, arguments), "UNAUTHORIZED")


# -- the host's policy file, in a home of its own ---------------------------------------------------


@pytest.fixture(scope="module", params=STORES)
def policy_pool(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pool]:
    scratch = tmp_path_factory.mktemp(f"policy-{request.param}")
    with home_on(str(request.param), scratch / "home", request) as home:
        running = Pool(home, scratch)
        try:
            yield running
        finally:
            running.close()


@pytest.fixture(scope="module")
def policy_home(policy_pool: Pool) -> HostPaths:
    return policy_pool.paths


@pytest.fixture(scope="module")
def policy_agent(policy_pool: Pool) -> McpAgent:
    return policy_pool.agent("alice")


def test_review_mode_pending_adjudication(policy_home: HostPaths, policy_agent: McpAgent) -> None:
    word = unique_word("review")
    with policy_edited(policy_home, policy_with(policy_home, mode='"review"')):
        pending = capture(policy_agent, f"Reviewed {word} decision.")
        value = admit(policy_agent, pending["candidate_id"])
    outcome = value["outcome"]
    assert outcome["status"] == "pending_adjudication"
    assert "record_id" not in outcome
    assert outcome["candidate_id"] == pending["candidate_id"]
    assert value["replayed"] is False
    assert found_ids(policy_agent, word) == []


def test_review_mode_undone_accepts_again(policy_home: HostPaths, policy_agent: McpAgent) -> None:
    with policy_edited(policy_home, policy_with(policy_home, mode='"review"')):
        held = capture(policy_agent, f"Held {unique_word()} decision.")
        assert admit(policy_agent, held["candidate_id"])["outcome"]["status"] == "pending_adjudication"
    pending = capture(policy_agent, f"Restored {unique_word()} decision.")
    assert admit(policy_agent, pending["candidate_id"])["outcome"]["status"] == "accepted"


def test_broken_policy_policy_unavailable_then_restored(policy_home: HostPaths, policy_agent: McpAgent) -> None:
    pending = capture(policy_agent, f"Before breakage {unique_word()}.")
    with policy_edited(policy_home, "mode = [this is not toml\n"):
        envelope = policy_agent.call(CAPTURE, capture_args(f"During breakage {unique_word()}."))
        assert_failure(envelope, "POLICY_UNAVAILABLE")
        assert envelope["error"]["retriable"] is True
        admission = policy_agent.call(
            ADMIT, {"candidate_id": pending["candidate_id"], "idempotency_key": unique_key("broken")}
        )
        assert_failure(admission, "POLICY_UNAVAILABLE")
    assert admit(policy_agent, pending["candidate_id"])["outcome"]["status"] == "accepted"
    capture(policy_agent, f"After repair {unique_word()}.")


def test_invalid_policy_value_policy_unavailable(policy_home: HostPaths, policy_agent: McpAgent) -> None:
    with policy_edited(policy_home, policy_with(policy_home, mode='"sometimes"')):
        envelope = policy_agent.call(CAPTURE, capture_args(f"Bad mode {unique_word()}."))
        assert_failure(envelope, "POLICY_UNAVAILABLE")
    capture(policy_agent, f"Good mode {unique_word()}.")


def test_retain_with_host_permission_accepted(policy_home: HostPaths, policy_agent: McpAgent) -> None:
    with policy_edited(policy_home, policy_with(policy_home, retain_principals='["alice"]')):
        _, record_id = remember(policy_agent, f"Retained {unique_word()}.", retention={"derivative_rule": "retain"})
        assert ok_value(policy_agent.call(GET, {"record_id": record_id, "purpose_ref": "purpose:tests"}))["record"][
            "retention"
        ] == {"derivative_rule": "retain"}


def test_retain_permission_for_other_principal_unauthorized(policy_home: HostPaths, policy_agent: McpAgent) -> None:
    with policy_edited(policy_home, policy_with(policy_home, retain_principals='["bob"]')):
        arguments = capture_args(f"Not mine {unique_word()}.", retention={"derivative_rule": "retain"})
        assert_failure(policy_agent.call(CAPTURE, arguments), "UNAUTHORIZED")


def test_expiry_cap_from_policy_unauthorized(policy_home: HostPaths, policy_agent: McpAgent) -> None:
    with policy_edited(policy_home, policy_with(policy_home, max_retention_days="7")):
        retention = {"derivative_rule": "make-ineligible", "expires_at": _instant(timedelta(days=8))}
        arguments = capture_args(f"Capped {unique_word()}.", retention=retention)
        assert_failure(policy_agent.call(CAPTURE, arguments), "UNAUTHORIZED")
        retention = {"derivative_rule": "make-ineligible", "expires_at": _instant(timedelta(days=6))}
        capture(policy_agent, f"Within cap {unique_word()}.", retention=retention)


def test_family_refs_with_consent_accepted(policy_home: HostPaths, policy_agent: McpAgent) -> None:
    families = {"family_refs": ["family:alpha", "family:beta"]}
    with policy_edited(policy_home, policy_with(policy_home, consented_families='["family:alpha", "family:beta"]')):
        _, record_id = remember(policy_agent, f"Family {unique_word()}.", reconciliation=families)
        record = ok_value(policy_agent.call(GET, {"record_id": record_id, "purpose_ref": "purpose:tests"}))["record"]
        assert record["reconciliation"] == families
        partly = capture_args(f"Partly {unique_word()}.", reconciliation={"family_refs": ["family:alpha", "family:z"]})
        assert_failure(policy_agent.call(CAPTURE, partly), "UNAUTHORIZED")


def test_require_attestation_policy_rejects_without_one(policy_home: HostPaths, policy_agent: McpAgent) -> None:
    with policy_edited(policy_home, policy_with(policy_home, require_attestation="true")):
        bare = capture(policy_agent, f"Unattested {unique_word()}.")
        assert admit(policy_agent, bare["candidate_id"])["outcome"]["status"] == "rejected"
        attested = capture(policy_agent, f"Attested {unique_word()}.", attestation="reviewed by the on-call lead")
        assert admit(policy_agent, attested["candidate_id"])["outcome"]["status"] == "accepted"


def test_capture_replay_keeps_first_retention_after_permission_withdrawn(
    policy_home: HostPaths, policy_agent: McpAgent
) -> None:
    arguments = capture_args(f"Retained replay {unique_word()}.", retention={"derivative_rule": "retain"})
    with policy_edited(policy_home, policy_with(policy_home, retain_principals='["alice"]')):
        first = ok_value(policy_agent.call(CAPTURE, arguments))
    # The host has since withdrawn the permission; the retry still replays the first capture.
    again = ok_value(policy_agent.call(CAPTURE, arguments))
    assert again["status"] == "duplicate_exact"
    assert (again["candidate_id"], again["record_digest"]) == (first["candidate_id"], first["record_digest"])


def test_min_citations_policy_rejects_too_few(policy_home: HostPaths, policy_agent: McpAgent) -> None:
    with policy_edited(policy_home, policy_with(policy_home, min_citations="2")):
        single = capture(policy_agent, f"One source {unique_word()}.")
        assert admit(policy_agent, single["candidate_id"])["outcome"]["status"] == "rejected"
        arguments = capture_args(f"Two sources {unique_word()}.")
        second = dict(arguments["payload"]["citations"][0], citation_id="src2", source_ref="doc:second")
        arguments["payload"]["citations"].append(second)
        double = ok_value(policy_agent.call(CAPTURE, arguments))
        assert admit(policy_agent, double["candidate_id"])["outcome"]["status"] == "accepted"


def test_size_policy_rejects_large_candidate(policy_home: HostPaths, policy_agent: McpAgent) -> None:
    with policy_edited(policy_home, policy_with(policy_home, max_payload_bytes="3000")):
        large = capture(policy_agent, f"Large {unique_word()} note. " + "words " * 600)
        assert admit(policy_agent, large["candidate_id"])["outcome"]["status"] == "rejected"
        small = capture(policy_agent, f"Small {unique_word()} note.")
        assert admit(policy_agent, small["candidate_id"])["outcome"]["status"] == "accepted"


def test_redaction_policy_removes_fields_keeps_record_id(policy_home: HostPaths, policy_agent: McpAgent) -> None:
    word = unique_word("redacted")
    _, record_id = remember(policy_agent, f"The {word} record has provenance.")
    redact = '["citations.locator", "provenance.session"]'
    with policy_edited(policy_home, policy_with(policy_home, redact_fields=redact)):
        value = ok_value(policy_agent.call(GET, {"record_id": record_id, "purpose_ref": "purpose:tests"}))
        record = value["record"]
        assert value["redacted_fields"] == ["citations.locator", "provenance.session"]
        assert record["record_id"] == record_id
        assert all("locator" not in citation for citation in record["citations"])
        assert "session" not in record["provenance"]
        search = ok_value(policy_agent.call("engram_memory_search", {"query": word, "purpose_ref": "purpose:tests"}))
        (packet,) = search["records"]
        assert packet["record"]["record_id"] == record_id
        assert packet["redacted_fields"] == ["citations.locator", "provenance.session"]
    plain = ok_value(policy_agent.call(GET, {"record_id": record_id, "purpose_ref": "purpose:tests"}))
    assert plain["redacted_fields"] == []
    assert "locator" in plain["record"]["citations"][0]


def test_tombstone_guard_ordinary_rejection_stays_rejected(policy_home: HostPaths, policy_agent: McpAgent) -> None:
    text = f"The {unique_word('guarded')} fact is forgotten, then offered again."
    _, record_id = remember(policy_agent, text)
    forget_now(policy_agent, policy_home, record_id)
    with policy_edited(policy_home, policy_with(policy_home, require_attestation="true")):
        again = capture(policy_agent, text)
        assert admit(policy_agent, again["candidate_id"])["outcome"]["status"] == "rejected"
    once_more = capture(policy_agent, text)
    assert admit(policy_agent, once_more["candidate_id"])["outcome"]["status"] == "pending_adjudication"


def test_personal_data_policy_rejects_email(policy_home: HostPaths, policy_agent: McpAgent) -> None:
    address = "jane.doe" + "@" + "acme-corp.io"
    plain = capture(policy_agent, f"Escalations {unique_word()} go to {address}.")
    assert admit(policy_agent, plain["candidate_id"])["outcome"]["status"] == "accepted"
    with policy_edited(policy_home, policy_with(policy_home, personal_data="true")):
        strict = capture(policy_agent, f"Escalations {unique_word()} go to {address}.")
        assert admit(policy_agent, strict["candidate_id"])["outcome"]["status"] == "rejected"


# -- digests: sha256(domain || 0x00 || JCS(value)), recomputed here independently ------------


def _payload_digest(value: dict[str, Any]) -> str:
    return "sha256:" + hashlib.sha256(b"graphify-memory/payload/v2\x00" + rfc8785.dumps(value)).hexdigest()


def test_record_digest_is_domain_separated_jcs_of_stored_payload(pool: Pool, alice_modern: McpAgent) -> None:
    assert _payload_digest(GOLDEN_PAYLOAD) == GOLDEN_DIGEST  # the recomputation below is the reference design's
    arguments = capture_args(f"Digest {unique_word()} check with caf\u00e9.")
    value = ok_value(alice_modern.call(CAPTURE, arguments))
    binding = pool.issued("alice").binding
    stored = {
        **arguments["payload"],
        "retention": {"derivative_rule": "make-ineligible"},
        "reconciliation": {"family_refs": []},
        "scope_ref": f"scope:{binding.tenant}/{binding.workspace}",
    }
    assert value["record_digest"] == _payload_digest(stored)
