"""SPEC §10: secrets are captured (sealed, pending), rejected at admission, never indexed, and their body is gone.

Every secret below is assembled at run time so that no credential-shaped literal sits in the source.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any

import pytest

from tests.mcp.helpers import (
    ADMIT,
    CAPTURE,
    HostCli,
    Pool,
    admit,
    assert_failure,
    db_count,
    files_containing,
    found_ids,
    ok_value,
    unique_word,
)
from tests.support.payloads import capture_args, unique_key


def _b64url(data: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")


def aws_key_id() -> str:
    return "AKIA" + "IOSFODNN7EXAMPLE"


def pem_private_key() -> str:
    dashes = "-" * 5
    body = "MIIEowIBAAKCAQEA" + "q7Zt3xKp9Lm2Vn8Rw4Ys6Hb1Jc5Df0Ga"
    return f"{dashes}BEGIN RSA PRIVATE KEY{dashes}\n{body}\n{dashes}END RSA PRIVATE KEY{dashes}"


def jwt() -> str:
    header = _b64url({"alg": "HS256", "typ": "JWT"})
    claims = _b64url({"sub": "1234567890", "name": "Build Bot", "iat": 1516239022})
    return header + "." + claims + "." + "SflKxwRJSMeKKF2QT4fw" + "pMeJf36POk6yJV_adQssw5c"


def url_with_password() -> str:
    return "https://" + "deploy" + ":" + "hunter2Secret" + "@git.example.com/team/repo.git"


def connection_string() -> str:
    return "postgresql://" + "app" + ":" + "s3cretPassw0rd" + "@db.internal:5432/prod"


def bearer_token() -> str:
    return "Authorization: Bearer " + "9f8Ks2LmQx7vT4pZ" + "1rYc6WbN3hJd0aEu"


def env_line() -> str:
    return "AWS_SECRET_ACCESS_KEY" + "=" + "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCYEXAMPLEKEY"


SECRETS: dict[str, Callable[[], str]] = {
    "aws-key-id": aws_key_id,
    "pem-private-key": pem_private_key,
    "jwt": jwt,
    "url-user-password": url_with_password,
    "connection-string": connection_string,
    "bearer-token": bearer_token,
    "env-assignment": env_line,
}


def _where(kind: str, text: str, secret: str) -> dict[str, Any]:
    """Capture arguments that put `secret` in the decision text (or another part, by `kind`)."""
    if kind == "context":
        return capture_args(text, context=f"Context line: {secret}")
    if kind == "attestation":
        return capture_args(text, attestation=f"Attested with {secret}")
    return capture_args(f"{text} {secret} end.")


CASES = [(name, "decision") for name in SECRETS] + [("aws-key-id", "context"), ("jwt", "attestation")]


@pytest.fixture(scope="module")
def rejected(pool: Pool) -> dict[tuple[str, str], dict[str, Any]]:
    """Each case captured and admitted once; the tests look at what that left behind."""
    agent = pool.agent("alice")
    results: dict[tuple[str, str], dict[str, Any]] = {}
    for name, kind in CASES:
        word = unique_word("secretcase")
        secret = SECRETS[name]()
        captured = ok_value(agent.call(CAPTURE, _where(kind, f"The {word} note about deploys:", secret)))
        outcome = admit(agent, captured["candidate_id"])
        results[name, kind] = {"word": word, "secret": secret, "captured": captured, "admission": outcome}
    return results


def _ids(cases: list[tuple[str, str]]) -> list[str]:
    return [f"{name}-in-{kind}" for name, kind in cases]


@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_secret_capture_committed_pending(
    rejected: dict[tuple[str, str], dict[str, Any]], case: tuple[str, str]
) -> None:
    assert rejected[case]["captured"]["status"] == "committed_pending"


@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_secret_admission_rejected(rejected: dict[tuple[str, str], dict[str, Any]], case: tuple[str, str]) -> None:
    value = rejected[case]["admission"]
    assert value["replayed"] is False
    outcome = value["outcome"]
    assert outcome["status"] == "rejected"
    assert set(outcome) == {
        "status",
        "candidate_id",
        "reasons",
        "cursor",
        "decision_receipt_digest",
        "transaction_receipt_digest",
    }
    assert outcome["candidate_id"] == rejected[case]["captured"]["candidate_id"]
    assert outcome["reasons"] and all(reason.startswith("secret:") for reason in outcome["reasons"])
    assert rejected[case]["secret"] not in json.dumps(value)


@pytest.mark.parametrize("case", CASES[:2], ids=_ids(CASES[:2]))
def test_review_show_gives_a_rejected_candidates_reasons(
    host: HostCli, rejected: dict[tuple[str, str], dict[str, Any]], case: tuple[str, str]
) -> None:
    candidate_id = rejected[case]["captured"]["candidate_id"]
    shown = json.loads(host.run("review", "show", candidate_id, "--json").stdout)
    assert shown["reasons"] == rejected[case]["admission"]["outcome"]["reasons"]
    assert shown["candidate"]["state"] == "rejected"
    text = host.run("review", "show", candidate_id).stdout
    assert all(reason in text for reason in shown["reasons"]) and rejected[case]["secret"] not in text


@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_secret_never_searchable(
    pool: Pool, rejected: dict[tuple[str, str], dict[str, Any]], case: tuple[str, str]
) -> None:
    agent = pool.agent("alice")
    assert found_ids(agent, rejected[case]["word"]) == []
    assert found_ids(agent, f"{rejected[case]['word']} deploys note") == []


@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_secret_rejected_body_destroyed(
    pool: Pool, rejected: dict[tuple[str, str], dict[str, Any]], case: tuple[str, str]
) -> None:
    candidate_id = rejected[case]["captured"]["candidate_id"]
    assert db_count(pool.paths, "sealed_bodies", "owner_id = ?", (candidate_id,)) == 0


@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_secret_readmission_already_terminal(
    pool: Pool, rejected: dict[tuple[str, str], dict[str, Any]], case: tuple[str, str]
) -> None:
    arguments = {"candidate_id": rejected[case]["captured"]["candidate_id"], "idempotency_key": unique_key("re")}
    assert_failure(pool.agent("alice").call(ADMIT, arguments), "ALREADY_TERMINAL")


def test_secret_plaintext_never_in_store_files(pool: Pool, rejected: dict[tuple[str, str], dict[str, Any]]) -> None:
    needles = []
    for case in rejected.values():
        needles.append(case["word"].encode())
        needles.append(case["secret"].encode())
    needles.append(b"hunter2Secret")
    needles.append(b"s3cretPassw0rd")
    assert files_containing(pool.paths, needles) == []


def test_clean_twin_of_secret_case_accepted(pool: Pool) -> None:
    """The same shape of note without the credential is accepted: the rejections above are for the secret."""
    agent = pool.agent("alice")
    word = unique_word("cleantwin")
    captured = ok_value(agent.call(CAPTURE, capture_args(f"The {word} note about deploys: rotate keys monthly.")))
    outcome = admit(agent, captured["candidate_id"])["outcome"]
    assert outcome["status"] == "accepted"
    assert found_ids(agent, word) == [outcome["record_id"]]
