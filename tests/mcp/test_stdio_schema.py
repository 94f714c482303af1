"""SPEC §3/§4: closed input schemas enforced at the edge. Each bad case sits next to a good twin where it helps
show the boundary (and that the failing case fails for the stated reason, not another one)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.mcp.helpers import (
    ADMIT,
    CAPTURE,
    FORGET,
    GET,
    SEARCH,
    WITHDRAW,
    Pool,
    assert_failure,
    capture,
    db_count,
    forget_args,
    key16,
    ok_value,
    remember,
    sample_args,
    unique_word,
    withdraw_args,
)
from tests.support.agents import McpAgent
from tests.support.homes import engine_for
from tests.support.payloads import PURPOSE, capture_args, with_change

Args = dict[str, Any]


def _cap(**knobs: Any) -> Args:
    return capture_args(f"Schema case {unique_word()} about closed inputs.", **knobs)


def _with_second_citation(args: Args) -> Args:
    citation = dict(args["payload"]["citations"][0], citation_id="other", source_ref="doc:other")
    return with_change(args, "payload/citations", [*args["payload"]["citations"], citation])


def _many_components(count: int, size: int) -> Args:
    args = _cap()
    main = args["payload"]["components"][0]
    prefix = unique_word("big") + " "
    args["payload"]["components"] = [
        {**main, "component_id": f"c{index}", "text": (prefix + "y" * size)[:size]} for index in range(count)
    ]
    args["payload"]["primary_component_id"] = "c0"
    return args


def _instant(delta: timedelta) -> str:
    moment = datetime.now(UTC) + delta
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _search(**extra: Any) -> Args:
    return {"query": "closed schema words", "purpose_ref": PURPOSE, **extra}


def _get(record_id: str = "mem_abcdefgh234567", **extra: Any) -> Args:
    return {"record_id": record_id, "purpose_ref": PURPOSE, **extra}


def _observed(instant: str) -> Args:
    return with_change(_cap(), "payload/citations/0/observed_at", instant)


def _duplicate_citation() -> Args:
    args = _cap()
    return with_change(args, "payload/citations", [args["payload"]["citations"][0]] * 2)


def _duplicate_component() -> Args:
    args = _cap()
    main = args["payload"]["components"][0]
    return with_change(args, "payload/components", [main, {**main, "kind": "context", "text": "other text"}])


def _cites(path: str, value: Any) -> Args:
    return with_change(_cap(), path, value)


def _event_cites_other() -> Args:
    """Citation 'other' exists, but the primary component does not cite it."""
    args = _with_second_citation(_cap())
    context = {"component_id": "ctx", "kind": "context", "text": "context", "citation_ids": ["other"]}
    args = with_change(args, "payload/components", [*args["payload"]["components"], context])
    return with_change(args, "payload/primary_event/citation_id", "other")


# (id, tool, builder) for arguments that must answer INVALID_SCHEMA.
INVALID: list[tuple[str, str, Callable[[], Args]]] = [
    # unknown fields, top level and nested; host-owned fields are unknown fields too
    ("search-unknown-top", SEARCH, lambda: _search(extra=1)),
    ("search-tenant-field", SEARCH, lambda: _search(tenant="tenant-b")),
    ("search-workspace-field", SEARCH, lambda: _search(workspace="workspace-2")),
    ("search-auditId-field", SEARCH, lambda: _search(auditId="aud_x")),
    ("search-unknown-nested", SEARCH, lambda: _search(capability_policy={"minimum_channels": "lexical", "x": 1})),
    ("get-principal-field", GET, lambda: _get(principal="bob")),
    ("capture-unknown-top", CAPTURE, lambda: {**_cap(), "extra": True}),
    ("capture-unknown-payload", CAPTURE, lambda: with_change(_cap(), "payload/extra", 1)),
    ("capture-unknown-component", CAPTURE, lambda: with_change(_cap(), "payload/components/0/extra", "x")),
    ("capture-unknown-citation", CAPTURE, lambda: with_change(_cap(), "payload/citations/0/extra", "x")),
    ("capture-unknown-locator", CAPTURE, lambda: with_change(_cap(), "payload/citations/0/locator/extra", "x")),
    ("capture-unknown-evidence", CAPTURE, lambda: with_change(_cap(), "evidence/extra", "x")),
    ("capture-scope-ref-field", CAPTURE, lambda: with_change(_cap(), "payload/scope_ref", "scope:tenant-b/w")),
    ("admit-unknown-top", ADMIT, lambda: {**sample_args(ADMIT), "decision": "accept"}),
    ("withdraw-confirmed-field", WITHDRAW, lambda: {**sample_args(WITHDRAW), "confirmed": True}),
    # missing required fields
    ("search-no-query", SEARCH, lambda: {"purpose_ref": PURPOSE}),
    ("search-no-purpose", SEARCH, lambda: {"query": "x"}),
    ("capture-no-evidence", CAPTURE, lambda: with_change(_cap(), "evidence", ...)),
    ("capture-no-primary-event", CAPTURE, lambda: with_change(_cap(), "payload/primary_event", ...)),
    ("forget-no-reason", FORGET, lambda: with_change(sample_args(FORGET), "reason_ref", ...)),
    # null for optional fields
    ("search-null-limit", SEARCH, lambda: _search(limit=None)),
    ("search-null-page-cursor", SEARCH, lambda: _search(page_cursor=None)),
    ("get-null-max-packet", GET, lambda: _get(max_packet_bytes=None)),
    ("capture-null-retention", CAPTURE, lambda: with_change(_cap(), "payload/retention", None)),
    ("capture-null-observed-at", CAPTURE, lambda: with_change(_cap(), "payload/citations/0/observed_at", None)),
    ("capture-null-t-end", CAPTURE, lambda: with_change(_cap(), "payload/valid_time/t_end", None)),
    ("capture-null-attestation", CAPTURE, lambda: with_change(_cap(), "evidence/attestation", None)),
    # wrong types
    ("search-query-number", SEARCH, lambda: {"query": 5, "purpose_ref": PURPOSE}),
    ("search-limit-string", SEARCH, lambda: _search(limit="5")),
    ("search-limit-bool", SEARCH, lambda: _search(limit=True)),
    ("search-limit-float", SEARCH, lambda: _search(limit=5.0)),
    ("capture-components-object", CAPTURE, lambda: with_change(_cap(), "payload/components", {"a": 1})),
    ("capture-t-float", CAPTURE, lambda: with_change(_cap(), "payload/valid_time/t", 5.0)),
    ("capture-t-fraction", CAPTURE, lambda: with_change(_cap(), "payload/valid_time/t", 1_700_000_000_000.5)),
    ("capture-t-nan", CAPTURE, lambda: with_change(_cap(), "payload/valid_time/t", float("nan"))),
    ("capture-t-infinity", CAPTURE, lambda: with_change(_cap(), "payload/valid_time/t", float("inf"))),
    ("capture-t-negative-zero", CAPTURE, lambda: with_change(_cap(), "payload/valid_time/t", -0.0)),
    ("capture-at-string", CAPTURE, lambda: with_change(_cap(), "payload/primary_event/at", "1700000000000")),
    ("capture-schema-version-3", CAPTURE, lambda: with_change(_cap(), "payload/schema_version", 3)),
    ("capture-kind-unknown", CAPTURE, lambda: with_change(_cap(), "payload/components/0/kind", "opinion")),
    # integer bounds
    ("capture-t-unsafe", CAPTURE, lambda: with_change(_cap(), "payload/valid_time/t", 2**53)),
    ("capture-t-unsafe-negative", CAPTURE, lambda: with_change(_cap(), "payload/valid_time/t", -(2**53))),
    ("capture-at-unsafe", CAPTURE, lambda: with_change(_cap(), "payload/primary_event/at", 2**53)),
    ("search-limit-0", SEARCH, lambda: _search(limit=0)),
    ("search-limit-51", SEARCH, lambda: _search(limit=51)),
    ("search-max-packet-4095", SEARCH, lambda: _search(max_packet_bytes=4095)),
    ("search-max-packet-over-1mib", SEARCH, lambda: _search(max_packet_bytes=1_048_577)),
    ("get-max-packet-4095", GET, lambda: _get(max_packet_bytes=4095)),
    # byte lengths (UTF-8 bytes, not code points)
    ("search-query-empty", SEARCH, lambda: {"query": "", "purpose_ref": PURPOSE}),
    ("search-query-8193-bytes", SEARCH, lambda: {"query": "q" * 8193, "purpose_ref": PURPOSE}),
    ("search-query-2731-3-byte-chars", SEARCH, lambda: {"query": "\u20ac" * 2731, "purpose_ref": PURPOSE}),
    ("capture-source-ref-513-bytes", CAPTURE, lambda: with_change(_cap(), "payload/citations/0/source_ref", "s" * 513)),
    (
        "capture-source-ref-513-bytes-multibyte",
        CAPTURE,
        lambda: with_change(_cap(), "payload/citations/0/source_ref", "\u00e9" * 256 + "s"),
    ),
    ("capture-source-ref-empty", CAPTURE, lambda: with_change(_cap(), "payload/citations/0/source_ref", "")),
    ("withdraw-reason-ref-empty", WITHDRAW, lambda: withdraw_args("cand_abcdefgh", reason="")),
    ("forget-reason-ref-513-bytes", FORGET, lambda: forget_args("mem_abcdefgh", reason="r" * 513)),
    ("capture-key-15-bytes", CAPTURE, lambda: _cap(key="k" * 15)),
    ("capture-key-15-bytes-multibyte", CAPTURE, lambda: _cap(key="\u00e9" * 7 + "k")),
    ("admit-key-257-bytes", ADMIT, lambda: {"candidate_id": "cand_abc", "idempotency_key": "k" * 257}),
    (
        "capture-text-65537-bytes",
        CAPTURE,
        lambda: with_change(_cap(), "payload/components/0/text", "t" * 65_537),
    ),
    ("capture-attestation-4097-bytes", CAPTURE, lambda: _cap(attestation="a" * 4097)),
    ("capture-argument-object-over-1mib", CAPTURE, lambda: _many_components(17, 65_536)),
    # NFC
    ("search-query-not-nfc", SEARCH, lambda: {"query": "cafe\u0301 decision", "purpose_ref": PURPOSE}),
    ("capture-text-not-nfc", CAPTURE, lambda: with_change(_cap(), "payload/components/0/text", "e\u0301 text")),
    ("capture-key-not-nfc", CAPTURE, lambda: _cap(key="key-cafe\u0301-0000000001")),
    # instants
    ("capture-instant-feb-30", CAPTURE, lambda: _observed("2026-02-30T00:00:00.000Z")),
    ("capture-instant-no-millis", CAPTURE, lambda: _observed("2026-01-01T00:00:00Z")),
    ("capture-instant-offset", CAPTURE, lambda: _observed("2026-01-01T00:00:00.000+00:00")),
    ("capture-instant-micros", CAPTURE, lambda: _observed("2026-01-01T00:00:00.000000Z")),
    ("capture-instant-lowercase-z", CAPTURE, lambda: _observed("2026-01-01t00:00:00.000z")),
    ("capture-instant-hour-24", CAPTURE, lambda: _observed("2026-01-01T24:00:00.000Z")),
    # cross-references
    ("capture-duplicate-citation-id", CAPTURE, _duplicate_citation),
    ("capture-duplicate-component-id", CAPTURE, _duplicate_component),
    ("capture-component-cites-unknown", CAPTURE, lambda: _cites("payload/components/0/citation_ids", ["ghost"])),
    ("capture-primary-component-unknown", CAPTURE, lambda: with_change(_cap(), "payload/primary_component_id", "x")),
    ("capture-primary-event-citation-unknown", CAPTURE, lambda: _cites("payload/primary_event/citation_id", "ghost")),
    ("capture-primary-event-citation-not-in-primary", CAPTURE, _event_cites_other),
    ("capture-evidence-cites-unknown", CAPTURE, lambda: _cites("evidence/citation_ids", ["src", "ghost"])),
    (
        "capture-component-citations-duplicated",
        CAPTURE,
        lambda: _cites("payload/components/0/citation_ids", ["src"] * 2),
    ),
    ("capture-evidence-citations-empty", CAPTURE, lambda: _cites("evidence/citation_ids", [])),
    ("capture-components-empty", CAPTURE, lambda: with_change(_cap(), "payload/components", [])),
    ("capture-citations-empty", CAPTURE, lambda: with_change(_cap(), "payload/citations", [])),
    ("capture-t-end-before-t", CAPTURE, lambda: with_change(_cap(), "payload/valid_time/t_end", 1_699_999_999_999)),
    ("capture-family-refs-unsorted", CAPTURE, lambda: _cap(reconciliation={"family_refs": ["family:b", "family:a"]})),
    ("capture-family-refs-duplicated", CAPTURE, lambda: _cap(reconciliation={"family_refs": ["family:a"] * 2})),
    # ids
    ("get-record-id-uppercase", GET, lambda: _get("mem_ABCDEFGH")),
    ("get-record-id-digit-1", GET, lambda: _get("mem_abc1")),
    ("get-record-id-candidate-shape", GET, lambda: _get("cand_abcdefgh234567")),
    ("get-record-id-empty-body", GET, lambda: _get("mem_")),
    ("forget-record-id-bad", FORGET, lambda: forget_args("record-42")),
]


@pytest.mark.parametrize(("tool", "build"), [case[1:] for case in INVALID], ids=[case[0] for case in INVALID])
def test_invalid_arguments_invalid_schema(alice_modern: McpAgent, tool: str, build: Callable[[], Args]) -> None:
    assert_failure(alice_modern.call(tool, build()), "INVALID_SCHEMA")


# (id, builder) for capture arguments whose only fault is a digest's shape.
BAD_DIGESTS: list[tuple[str, Callable[[], Args]]] = [
    ("content-uppercase-hex", lambda: with_change(_cap(), "payload/citations/0/content_digest", "sha256:" + "AB" * 32)),
    ("content-63-hex", lambda: with_change(_cap(), "payload/citations/0/content_digest", "sha256:" + "a" * 63)),
    ("content-65-hex", lambda: with_change(_cap(), "payload/citations/0/content_digest", "sha256:" + "a" * 65)),
    ("content-no-prefix", lambda: with_change(_cap(), "payload/citations/0/content_digest", "a" * 64)),
    ("content-sha1-prefix", lambda: with_change(_cap(), "payload/citations/0/content_digest", "sha1:" + "a" * 64)),
    ("evidence-uppercase-hex", lambda: with_change(_cap(), "evidence/evidence_digest", "sha256:" + "F" * 64)),
    ("evidence-short", lambda: with_change(_cap(), "evidence/evidence_digest", "sha256:abc")),
]


@pytest.mark.parametrize("build", [case[1] for case in BAD_DIGESTS], ids=[case[0] for case in BAD_DIGESTS])
def test_malformed_digest_invalid_digest(alice_modern: McpAgent, build: Callable[[], Args]) -> None:
    assert_failure(alice_modern.call(CAPTURE, build()), "INVALID_DIGEST")


def test_invalid_capture_writes_nothing(pool: Pool, alice_modern: McpAgent) -> None:
    journal, candidates = db_count(pool.paths, "journal"), db_count(pool.paths, "candidates")
    assert_failure(alice_modern.call(CAPTURE, _duplicate_citation()), "INVALID_SCHEMA")
    assert_failure(alice_modern.call(CAPTURE, _many_components(17, 65_536)), "INVALID_SCHEMA")
    assert (db_count(pool.paths, "journal"), db_count(pool.paths, "candidates")) == (journal, candidates)


# (id, tool, builder) for the good twins of the boundary cases above.
VALID: list[tuple[str, str, Callable[[], Args]]] = [
    ("search-query-8192-bytes", SEARCH, lambda: {"query": ("lorem " * 1366)[:8192], "purpose_ref": PURPOSE}),
    ("search-query-2730-3-byte-chars", SEARCH, lambda: {"query": "\u20ac" * 2730, "purpose_ref": PURPOSE}),
    ("search-query-nfc", SEARCH, lambda: {"query": "caf\u00e9 decision", "purpose_ref": PURPOSE}),
    ("search-limit-1", SEARCH, lambda: _search(limit=1)),
    ("search-limit-50", SEARCH, lambda: _search(limit=50)),
    ("search-max-packet-4096", SEARCH, lambda: _search(max_packet_bytes=4096)),
    ("search-max-packet-1mib", SEARCH, lambda: _search(max_packet_bytes=1_048_576)),
    (
        "search-network-allow",
        SEARCH,
        lambda: _search(capability_policy={"minimum_channels": "lexical", "network": "allow"}),
    ),
    ("capture-key-16-bytes", CAPTURE, lambda: _cap(key=key16())),
    ("capture-key-256-bytes", CAPTURE, lambda: _cap(key="k" * 240 + key16())),
    ("capture-text-65536-bytes", CAPTURE, lambda: with_change(_cap(), "payload/components/0/text", _text(65_536))),
    ("capture-source-ref-512-bytes", CAPTURE, lambda: with_change(_cap(), "payload/citations/0/source_ref", "s" * 512)),
    ("capture-attestation-4096-bytes", CAPTURE, lambda: _cap(attestation="a" * 4096)),
    ("capture-argument-object-under-1mib", CAPTURE, lambda: _many_components(15, 65_536)),
    (
        "capture-t-latest-default-bound",
        CAPTURE,
        lambda: with_change(_cap(), "payload/valid_time/t", 253_402_300_799_999),
    ),
    ("capture-t-1950", CAPTURE, lambda: with_change(_cap(), "payload/valid_time/t", -631_152_000_000)),
    ("capture-t-end-equal-t", CAPTURE, lambda: with_change(_cap(), "payload/valid_time/t_end", 1_700_000_000_000)),
    ("capture-observed-at-canonical", CAPTURE, lambda: _observed("2024-02-29T23:59:59.999Z")),
    ("capture-family-refs-empty", CAPTURE, lambda: _cap(reconciliation={"family_refs": []})),
    ("capture-two-citations", CAPTURE, lambda: _with_second_citation(_cap())),
    (
        "capture-expires-at-future",
        CAPTURE,
        lambda: _cap(retention={"derivative_rule": "make-ineligible", "expires_at": _instant(timedelta(days=30))}),
    ),
]


def _text(size: int) -> str:
    word = unique_word("long") + " "
    return (word + "t" * size)[:size]


@pytest.mark.parametrize(("tool", "build"), [case[1:] for case in VALID], ids=[case[0] for case in VALID])
def test_boundary_arguments_accepted(alice_modern: McpAgent, tool: str, build: Callable[[], Args]) -> None:
    value = ok_value(alice_modern.call(tool, build()))
    if tool is CAPTURE:
        assert value["status"] == "committed_pending"
    else:
        assert isinstance(value["records"], list)


def test_forget_confirmed_true_invalid_schema_no_request(pool: Pool, alice_modern: McpAgent) -> None:
    _, record_id = remember(alice_modern, f"Confirmed flag {unique_word()} record.")
    arguments = {**forget_args(record_id), "confirmed": True}
    assert_failure(alice_modern.call(FORGET, arguments), "INVALID_SCHEMA")
    with engine_for(pool.paths) as engine:
        assert [row for row, _ in engine.confirmations(include_decided=True) if row.target == record_id] == []
    # The record is untouched: the model-written confirmation had no effect at all.
    assert (
        ok_value(alice_modern.call(GET, {"record_id": record_id, "purpose_ref": PURPOSE}))["record"]["record_id"]
        == record_id
    )


def test_withdraw_schema_error_before_target_lookup(alice_modern: McpAgent) -> None:
    pending = capture(alice_modern, f"Schema first {unique_word()} candidate.")
    arguments = withdraw_args(pending["candidate_id"], key="short")
    assert_failure(alice_modern.call(WITHDRAW, arguments), "INVALID_SCHEMA")
    unknown = withdraw_args("cand_" + "a" * 26, key="short")
    assert_failure(alice_modern.call(WITHDRAW, unknown), "INVALID_SCHEMA")


def test_record_id_checked_before_existence(alice_modern: McpAgent) -> None:
    assert_failure(alice_modern.call(GET, _get("mem_abcdefgh234567")), "NOT_FOUND")
    assert_failure(alice_modern.call(GET, _get("mem_abcdefgh234568")), "INVALID_SCHEMA")


def test_admission_key_15_bytes_invalid_schema(alice_modern: McpAgent) -> None:
    pending = capture(alice_modern, f"Short key {unique_word()} candidate.")
    arguments = {"candidate_id": pending["candidate_id"], "idempotency_key": "k" * 15}
    assert_failure(alice_modern.call(ADMIT, arguments), "INVALID_SCHEMA")
    accepted = ok_value(alice_modern.call(ADMIT, {**arguments, "idempotency_key": key16()}))
    assert accepted["outcome"]["status"] == "accepted"


@pytest.mark.parametrize("tool", [SEARCH, GET, CAPTURE, ADMIT, WITHDRAW, FORGET])
def test_missing_arguments_invalid_schema(alice_modern: McpAgent, tool: str) -> None:
    assert_failure(alice_modern.call(tool, None), "INVALID_SCHEMA")
    assert_failure(alice_modern.call(tool, {}), "INVALID_SCHEMA")
