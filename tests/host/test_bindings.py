"""Host-signed binding tokens: issued with exactly the host's values, verified only with the host's key.

A token whose signature verifies still yields its binding after expiry (the engine answers
AUTHORIZATION_EXPIRED per call); anything that does not verify yields no binding at all.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from engram_memory.contract.tools import Tool
from engram_memory.host.bindings import (
    AUDIENCE,
    CLAIMS_KEY,
    ISSUER,
    MAX_LIFETIME_S,
    BindingError,
    issue_binding,
    parse_duration,
    verify_binding,
)
from engram_memory.host.keys.files import key_id, load_signing_key
from engram_memory.host.settings import HostPaths
from tests.support.homes import ALL_GRANTS, engine_for, make_home
from tests.support.payloads import PURPOSE

NOW_S = 1_800_000_000
VALUES: dict[str, str] = {
    "tenant": "acme",
    "workspace": "platform",
    "principal": "alice@acme",
    "agent_id": "claude-code",
    "session": "session-42",
    "purpose_ref": PURPOSE,
}


@pytest.fixture
def key(paths: HostPaths) -> Ed25519PrivateKey:
    return load_signing_key(paths)


def _issue(key: Ed25519PrivateKey, **changes: Any) -> Any:
    arguments: dict[str, Any] = {
        **VALUES,
        "grants": frozenset({Tool.SEARCH.value, Tool.GET.value}),
        "confirm_mutations": False,
        "lifetime_s": 3600,
        "now_s": NOW_S,
    }
    arguments.update(changes)
    return issue_binding(key, **arguments)


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _claims(**changes: Any) -> dict[str, Any]:
    claims: dict[str, Any] = {
        "iss": ISSUER,
        "aud": AUDIENCE,
        "sub": VALUES["principal"],
        "jti": "bind_aaaaaaaaaaaaaaaa",
        "iat": NOW_S,
        "exp": NOW_S + 3600,
        CLAIMS_KEY: {**VALUES, "grants": ["engram_memory_search"], "confirm_mutations": False},
    }
    claims.update(changes)
    return claims


# -- durations -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90", 90),
        ("90s", 90),
        ("1s", 1),
        ("30m", 1800),
        ("8h", 28_800),
        ("7d", 604_800),
        ("366d", 31_622_400),
        ("8784h", 31_622_400),
        ("31622400s", 31_622_400),
        (" 8h ", 28_800),
    ],
)
def test_parse_duration_reads_seconds_minutes_hours_and_days(text: str, seconds: int) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    "text", ["5y", "0s", "0", "-1h", "", "1.5h", "8H", "1 h", "01h", "h", "7d2h", "1e3", "\u0661h", "9999999999"]
)
def test_parse_duration_refuses_text_that_is_not_a_positive_duration(text: str) -> None:
    with pytest.raises(BindingError) as raised:
        parse_duration(text)
    assert str(raised.value) == "a duration looks like 90s, 30m, 8h or 7d"


@pytest.mark.parametrize("text", ["367d", "8785h", "31622401s", "31622401", "999999999d"])
def test_parse_duration_refuses_a_lifetime_over_366_days(text: str) -> None:
    with pytest.raises(BindingError) as raised:
        parse_duration(text)
    assert str(raised.value) == "a binding lives at most 366 days"


# -- issue and verify ----------------------------------------------------------------------------


def test_issued_token_verifies_to_exactly_the_issued_binding(key: Ed25519PrivateKey) -> None:
    issued = _issue(key, confirm_mutations=True, lifetime_s=90)
    binding = verify_binding(key.public_key(), issued.token)
    assert binding == issued.binding
    assert binding.tenant == "acme"
    assert binding.workspace == "platform"
    assert binding.principal == "alice@acme"
    assert binding.agent_id == "claude-code"
    assert binding.session == "session-42"
    assert binding.purpose_ref == PURPOSE
    assert binding.grants == frozenset({"engram_memory_search", "engram_memory_get"})
    assert binding.confirm_mutations is True
    assert binding.issued_at_ms == NOW_S * 1000
    assert binding.expires_at_ms == (NOW_S + 90) * 1000
    assert binding.token_id.startswith("bind_")


def test_issued_token_is_an_eddsa_jwt_naming_the_host_key(key: Ed25519PrivateKey) -> None:
    token = _issue(key).token
    header = jwt.get_unverified_header(token)
    assert header == {"alg": "EdDSA", "typ": "JWT", "kid": key_id(key.public_key())}
    claims = json.loads(_unb64url(token.split(".")[1]))
    assert claims == {
        "iss": ISSUER,
        "aud": AUDIENCE,
        "sub": "alice@acme",
        "jti": claims["jti"],
        "iat": NOW_S,
        "exp": NOW_S + 3600,
        CLAIMS_KEY: {
            **VALUES,
            "grants": ["engram_memory_get", "engram_memory_search"],
            "confirm_mutations": False,
            "trust_class": "asserted",
        },
    }


def test_issued_token_with_no_grant_verifies_to_a_binding_granting_nothing(key: Ed25519PrivateKey) -> None:
    binding = verify_binding(key.public_key(), _issue(key, grants=frozenset()).token)
    assert binding.grants == frozenset()
    assert not any(binding.grants_tool(tool.value) for tool in Tool)


def test_issued_token_with_every_grant_grants_the_six_tools(key: Ed25519PrivateKey) -> None:
    binding = verify_binding(key.public_key(), _issue(key, grants=ALL_GRANTS).token)
    assert binding.grants == frozenset(tool.value for tool in Tool)


def test_issued_tokens_have_distinct_ids(key: Ed25519PrivateKey) -> None:
    assert len({_issue(key).binding.token_id for _ in range(20)}) == 20


def test_unicode_values_round_trip_unchanged(key: Ed25519PrivateKey) -> None:
    issued = _issue(key, tenant="équipe-北京", principal="ålice", session="s" * 512)
    binding = verify_binding(key.public_key(), issued.token)
    assert (binding.tenant, binding.principal, binding.session) == ("équipe-北京", "ålice", "s" * 512)


def test_token_with_an_appended_character_does_not_verify(key: Ed25519PrivateKey) -> None:
    token = _issue(key).token
    with pytest.raises(BindingError):
        verify_binding(key.public_key(), token + "x")


# -- refusals at issue ---------------------------------------------------------------------------


@pytest.mark.parametrize("field", sorted(VALUES))
@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("", "must be a non-empty string"),
        ("e\u0301", "must be NFC text of at most 512 bytes"),
        ("x" * 513, "must be NFC text of at most 512 bytes"),
        ("é" * 257, "must be NFC text of at most 512 bytes"),
        ("a\x00b", "must not contain control characters"),
        ("a\nb", "must not contain control characters"),
        ("a\u202eb", "must not contain control characters"),
    ],
    ids=["empty", "not-nfc", "513-bytes", "514-utf8-bytes", "nul", "newline", "bidi-override"],
)
def test_issue_binding_refuses_a_bad_value(key: Ed25519PrivateKey, field: str, value: str, message: str) -> None:
    with pytest.raises(BindingError) as raised:
        _issue(key, **{field: value})
    assert str(raised.value) == f"{field} {message}"


@pytest.mark.parametrize("grants", [{"search"}, {"engram_memory_delete"}, {"engram_memory_search", "forget"}])
def test_issue_binding_refuses_a_grant_that_is_not_a_full_tool_name(key: Ed25519PrivateKey, grants: set[str]) -> None:
    with pytest.raises(BindingError) as raised:
        _issue(key, grants=frozenset(grants))
    assert str(raised.value) == "a grant names a tool that does not exist"


@pytest.mark.parametrize("lifetime_s", [0, -1, MAX_LIFETIME_S + 1])
def test_issue_binding_refuses_a_lifetime_out_of_bounds(key: Ed25519PrivateKey, lifetime_s: int) -> None:
    with pytest.raises(BindingError) as raised:
        _issue(key, lifetime_s=lifetime_s)
    assert str(raised.value) == "a binding lives between 1 second and 366 days"


def test_issue_binding_accepts_the_longest_lifetime(key: Ed25519PrivateKey) -> None:
    binding = _issue(key, lifetime_s=MAX_LIFETIME_S).binding
    assert binding.expires_at_ms - binding.issued_at_ms == 366 * 86_400_000


# -- what does not verify ------------------------------------------------------------------------


def test_token_from_another_home_does_not_verify(tmp_path: Path) -> None:
    home_a = make_home(tmp_path / "a")
    home_b = make_home(tmp_path / "b")
    token = _issue(load_signing_key(home_a)).token
    with pytest.raises(BindingError) as raised:
        verify_binding(load_signing_key(home_b).public_key(), token)
    assert str(raised.value) == "the binding token does not verify against this host's key"


def test_tampering_with_any_byte_of_the_payload_fails(key: Ed25519PrivateKey) -> None:
    header, payload, signature = _issue(key).token.split(".")
    raw = _unb64url(payload)
    for index in range(len(raw)):
        for flip in (0x01, 0x80):
            tampered = bytearray(raw)
            tampered[index] ^= flip
            token = f"{header}.{_b64url(bytes(tampered))}.{signature}"
            with pytest.raises(BindingError):
                verify_binding(key.public_key(), token)


def test_tampering_with_any_character_of_the_payload_fails(key: Ed25519PrivateKey) -> None:
    header, payload, signature = _issue(key).token.split(".")
    for index, char in enumerate(payload):
        replacement = "A" if char != "A" else "B"
        changed = payload[:index] + replacement + payload[index + 1 :]
        if _unb64url(changed) == _unb64url(payload):
            continue  # only the unused low bits of the last character changed: the bytes are the same
        with pytest.raises(BindingError):
            verify_binding(key.public_key(), f"{header}.{changed}.{signature}")


def test_tampering_with_any_byte_of_the_header_or_signature_fails(key: Ed25519PrivateKey) -> None:
    header, payload, signature = _issue(key).token.split(".")
    for part in ("header", "signature"):
        raw = _unb64url(header if part == "header" else signature)
        for index in range(len(raw)):
            tampered = bytearray(raw)
            tampered[index] ^= 0x01
            encoded = _b64url(bytes(tampered))
            token = f"{encoded}.{payload}.{signature}" if part == "header" else f"{header}.{payload}.{encoded}"
            with pytest.raises(BindingError):
                verify_binding(key.public_key(), token)


def test_payload_of_one_token_under_the_signature_of_another_fails(key: Ed25519PrivateKey) -> None:
    first = _issue(key, tenant="tenant-a").token.split(".")
    second = _issue(key, tenant="tenant-b").token.split(".")
    with pytest.raises(BindingError):
        verify_binding(key.public_key(), f"{first[0]}.{second[1]}.{first[2]}")


@pytest.mark.parametrize("token", ["", "garbage", "a.b.c", "a.b", "....", "é.é.é"])
def test_garbage_does_not_verify(key: Ed25519PrivateKey, token: str) -> None:
    with pytest.raises(BindingError):
        verify_binding(key.public_key(), token)


def test_unsigned_token_does_not_verify(key: Ed25519PrivateKey) -> None:
    header = _b64url(json.dumps({"alg": "none", "typ": "JWT"}).encode())
    payload = _b64url(json.dumps(_claims()).encode())
    with pytest.raises(BindingError):
        verify_binding(key.public_key(), f"{header}.{payload}.")


def test_hmac_token_does_not_verify_even_with_the_public_key_as_secret(key: Ed25519PrivateKey) -> None:
    public_pem = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    header = _b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    payload = _b64url(json.dumps(_claims()).encode())
    mac = hmac.new(public_pem, f"{header}.{payload}".encode(), hashlib.sha256).digest()
    with pytest.raises(BindingError):
        verify_binding(key.public_key(), f"{header}.{payload}.{_b64url(mac)}")


@pytest.mark.parametrize(
    "changes",
    [
        {"iss": "someone-else"},
        {"aud": "another-service"},
        {"sub": "mallory"},
        {"iat": "yesterday"},
        {"exp": 1.5},
        {"iat": True},
        {"jti": ""},
        {CLAIMS_KEY: "not-an-object"},
        {CLAIMS_KEY: {**VALUES, "grants": ["engram_memory_delete"], "confirm_mutations": False}},
        {CLAIMS_KEY: {**VALUES, "grants": "engram_memory_search", "confirm_mutations": False}},
        {CLAIMS_KEY: {**VALUES, "grants": [], "confirm_mutations": "yes"}},
        {CLAIMS_KEY: {**VALUES, "tenant": "e\u0301", "grants": [], "confirm_mutations": False}},
        {CLAIMS_KEY: {**VALUES, "tenant": 7, "grants": [], "confirm_mutations": False}},
        {CLAIMS_KEY: {"grants": [], "confirm_mutations": False}},
    ],
    ids=[
        "issuer",
        "audience",
        "subject-not-principal",
        "iat-text",
        "exp-float",
        "iat-bool",
        "empty-jti",
        "claims-not-object",
        "unknown-grant",
        "grants-not-list",
        "switch-not-bool",
        "tenant-not-nfc",
        "tenant-number",
        "values-missing",
    ],
)
def test_host_signed_token_with_malformed_claims_does_not_verify(
    key: Ed25519PrivateKey, changes: dict[str, Any]
) -> None:
    token = jwt.encode(_claims(**changes), key, algorithm="EdDSA")
    with pytest.raises(BindingError):
        verify_binding(key.public_key(), token)


@pytest.mark.parametrize("missing", ["iss", "aud", "sub", "jti", "iat", "exp", CLAIMS_KEY])
def test_host_signed_token_missing_a_claim_does_not_verify(key: Ed25519PrivateKey, missing: str) -> None:
    claims = _claims()
    del claims[missing]
    token = jwt.encode(claims, key, algorithm="EdDSA")
    with pytest.raises(BindingError):
        verify_binding(key.public_key(), token)


def test_host_signed_token_with_well_formed_claims_verifies(key: Ed25519PrivateKey) -> None:
    token = jwt.encode(_claims(), key, algorithm="EdDSA")
    binding = verify_binding(key.public_key(), token)
    assert binding.token_id == "bind_aaaaaaaaaaaaaaaa"
    assert binding.grants == frozenset({"engram_memory_search"})


# -- expiry is judged per call -------------------------------------------------------------------


def test_expired_token_still_verifies(key: Ed25519PrivateKey) -> None:
    now_s = int(time.time())
    issued = _issue(key, now_s=now_s - 7200, lifetime_s=3600)
    binding = verify_binding(key.public_key(), issued.token)
    assert binding == issued.binding
    assert binding.expired_at(now_s * 1000)
    assert not binding.expired_at((now_s - 3601) * 1000)


def test_token_issued_in_the_future_still_verifies(key: Ed25519PrivateKey) -> None:
    issued = _issue(key, now_s=int(time.time()) + 86_400)
    assert verify_binding(key.public_key(), issued.token) == issued.binding


def test_expired_token_answers_authorization_expired_per_call(paths: HostPaths, key: Ed25519PrivateKey) -> None:
    expired = _issue(key, grants=ALL_GRANTS, now_s=int(time.time()) - 7200, lifetime_s=3600)
    binding = verify_binding(key.public_key(), expired.token)
    with engine_for(paths) as engine:
        envelope = engine.handle(binding, Tool.SEARCH, {"query": "deploys", "purpose_ref": PURPOSE})
    assert envelope["ok"] is False
    assert envelope["error"]["code"] == "AUTHORIZATION_EXPIRED"
    assert envelope["error"]["retriable"] is False


def test_live_token_is_served_per_call(paths: HostPaths, key: Ed25519PrivateKey) -> None:
    live = _issue(key, grants=ALL_GRANTS, now_s=int(time.time()), lifetime_s=3600)
    with engine_for(paths) as engine:
        envelope = engine.handle(live.binding, Tool.SEARCH, {"query": "deploys", "purpose_ref": PURPOSE})
    assert envelope["ok"] is True, envelope
