"""The access rules decide from verified claims alone: the first rule whose every condition holds, and
nobody a rule does not admit. Each test here tries to get in (or get more) where the rules say no."""

from __future__ import annotations

import pytest

from engram_memory.host.access.rules import Identity
from engram_memory.host.access.rules_file import parse_access_rules

GOOGLE = "https://accounts.google.com"
OKTA = "https://acme.okta.com"

RULES = parse_access_rules(
    f"""
[[rules]]
name = "contractors"
group = ["contractors", "interns"]
refuse = true

[[rules]]
name = "platform"
issuer = "{OKTA}"
group = "eng-platform"
tenant = "acme"
workspaces = ["platform", "shared"]
grants = "all"

[[rules]]
name = "staff"
issuer = ["{GOOGLE}", "{OKTA}"]
email_domain = "Acme.COM"
tenant = "acme"
workspace = "shared"
grants = ["search", "get"]

[[rules]]
name = "one guest"
email = "Guest@Partner.org"
tenant = "partner"
workspace = "joint"
"""
)


def person(
    email: str | None = "alice@acme.com",
    *,
    issuer: str = GOOGLE,
    groups: tuple[str, ...] = (),
    verified: bool = True,
    subject: str = "1234",
) -> Identity:
    return Identity(issuer=issuer, subject=subject, email=email, email_verified=verified, groups=frozenset(groups))


def test_the_first_matching_rule_decides() -> None:
    decision = RULES.decide(person(issuer=OKTA, groups=("eng-platform",)))
    assert decision.rule == "platform"
    assert decision.access is not None
    assert decision.access.workspaces == ("platform", "shared")
    assert len(decision.access.grants) == 6


def test_a_refusing_rule_wins_over_later_rules_that_would_admit() -> None:
    decision = RULES.decide(person(issuer=OKTA, groups=("eng-platform", "contractors")))
    assert decision.refused
    assert decision.rule == "contractors"


def test_every_condition_of_a_rule_must_hold() -> None:
    # the platform group at the wrong issuer: the "platform" rule needs both, so "staff" decides
    decision = RULES.decide(person(issuer=GOOGLE, groups=("eng-platform",)))
    assert decision.rule == "staff"
    assert decision.access is not None
    assert decision.access.grants == frozenset({"engram_memory_search", "engram_memory_get"})


def test_email_and_domain_compare_without_case() -> None:
    assert RULES.decide(person("ALICE@acme.com")).rule == "staff"
    assert RULES.decide(person("guest@partner.ORG", issuer="https://idp.partner.org")).rule == "one guest"


@pytest.mark.parametrize(
    "email",
    [
        "alice@acme.com",  # unverified
        "guest@partner.org",
    ],
)
def test_an_unverified_email_matches_no_email_or_domain_condition(email: str) -> None:
    decision = RULES.decide(person(email, verified=False))
    assert decision.refused
    assert decision.rule is None


@pytest.mark.parametrize(
    "email",
    ["alice@acme.com.evil.org", "alice@notacme.com", "alice@sub.acme.com", "acme.com@evil.org", "alice"],
)
def test_a_lookalike_domain_is_not_the_domain(email: str) -> None:
    assert RULES.decide(person(email)).refused


def test_an_issuer_the_rules_do_not_name_gets_nothing_by_domain() -> None:
    assert RULES.decide(person(issuer="https://evil.example")).refused


def test_nobody_matched_is_refused() -> None:
    decision = RULES.decide(person("bob@elsewhere.net"))
    assert decision.refused
    assert decision.rule is None


def test_no_rules_refuse_everyone() -> None:
    assert parse_access_rules("").decide(person()).refused


def test_everyone_admits_whoever_reached_it() -> None:
    rules = parse_access_rules('[[rules]]\neveryone = true\ntenant = "t"\nworkspace = "w"\n')
    assert rules.decide(person(None, issuer="https://any")).rule == "rule 1"


def test_the_principal_is_the_verified_email_or_the_subject_at_its_issuer() -> None:
    assert person("Alice@Acme.com").principal == "alice@acme.com"
    assert person("alice@acme.com", verified=False, subject="u-77").principal == f"u-77@{GOOGLE}"
    assert person(None, subject="u-77").principal == f"u-77@{GOOGLE}"
