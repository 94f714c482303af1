"""access.toml is read strictly: defaults are inherited, and every mistake refuses the whole file with one
line naming the rule and the key (a typo must never admit anyone, or widen what they get)."""

from __future__ import annotations

from pathlib import Path

import pytest

from engram_memory.host.access.rules_file import (
    DEFAULT_ACCESS_LIFETIME_S,
    DEFAULT_GRANTS,
    DEFAULT_REFRESH_LIFETIME_S,
    EXAMPLE_ACCESS_TOML,
    AccessRulesError,
    parse_access_rules,
    read_access_rules,
)

RULE = '[[rules]]\nname = "r"\nemail_domain = "acme.com"\ntenant = "acme"\nworkspace = "w"\n'


def test_a_rule_without_settings_gets_the_defaults() -> None:
    access = parse_access_rules(RULE).rules[0].access
    assert access is not None
    assert access.grants == DEFAULT_GRANTS
    assert access.purpose == "team-memory"
    assert access.confirm_mutations is False
    assert access.trust_class == "asserted"
    assert access.access_lifetime_s == DEFAULT_ACCESS_LIFETIME_S
    assert access.refresh_lifetime_s == DEFAULT_REFRESH_LIFETIME_S
    assert access.workspaces == ("w",)


def test_defaults_are_inherited_and_a_rule_overrides_them() -> None:
    text = (
        '[defaults]\ngrants = ["search"]\npurpose = "ops"\nconfirm_mutations = true\naccess_lifetime = "5m"\n'
        'trust_class = "earned"\nrefresh_lifetime = "2d"\n' + RULE + 'purpose = "own"\naccess_lifetime = "1h"\n'
    )
    access = parse_access_rules(text).rules[0].access
    assert access is not None
    assert access.grants == frozenset({"engram_memory_search"})
    assert (access.purpose, access.confirm_mutations, access.trust_class) == ("own", True, "earned")
    assert (access.access_lifetime_s, access.refresh_lifetime_s) == (3600, 2 * 86_400)


def test_workspaces_keep_their_order_and_lose_repeats() -> None:
    text = RULE.replace('workspace = "w"', 'workspaces = ["b", "a", "b"]')
    access = parse_access_rules(text).rules[0].access
    assert access is not None
    assert access.workspaces == ("b", "a")


def test_the_example_reads_and_decides_as_its_comments_say() -> None:
    from engram_memory.host.access.rules import Identity

    rules = parse_access_rules(EXAMPLE_ACCESS_TOML)
    staff = Identity(issuer="https://idp", subject="1", email="a@example.com", email_verified=True)
    contractor = Identity(
        issuer="https://idp", subject="2", email="c@example.com", email_verified=True, groups=frozenset({"contractors"})
    )
    assert rules.decide(staff).rule == "engineering"
    assert rules.decide(contractor).refused


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("rules = [", "not valid TOML"),
        ("[rule]\nx = 1\n", "unknown table or key 'rule'"),
        ("defaults = 1\n", "[defaults] must be a table"),
        ("[defaults]\ngrant = []\n", "[defaults]: unknown key 'grant'"),
        ("rules = 1\n", "rules must be an array of tables"),
        (RULE + "grant = []\n", "rule 1 ('r'): unknown key 'grant'"),
        ('[[rules]]\nname = ""\n', "rule 1: name must be a non-empty string"),
        ('[[rules]]\nname = "r"\ntenant = "t"\nworkspace = "w"\n', "no condition"),
        (RULE + "everyone = true\n", "everyone = true cannot stand beside a condition"),
        (RULE.replace('email_domain = "acme.com"', "email_domain = []"), "email_domain must be a non-empty"),
        (RULE.replace('email_domain = "acme.com"', "group = [1]"), "group must be a non-empty"),
        (RULE + "refuse = true\n", "a refusing rule grants nothing, but it names 'tenant'"),
        (RULE + 'refuse = "yes"\n', "refuse must be true or false"),
        (RULE.replace('tenant = "acme"', "tenant = 7"), "tenant must be a non-empty string"),
        (RULE.replace('workspace = "w"', ""), "workspace (or workspaces) is required"),
        (RULE + 'workspaces = ["x"]\n', "give workspace or workspaces, not both"),
        (RULE + 'grants = ["serch"]\n', "grants names an unknown tool 'serch'"),
        (RULE + 'grants = "some"\n', 'grants must be "all" or a list'),
        (RULE + 'purpose = ""\n', "purpose must be a non-empty string"),
        (RULE + 'trust_class = "root"\n', "trust_class must be one of asserted, earned, signed"),
        (RULE + 'confirm_mutations = "no"\n', "confirm_mutations must be true or false"),
        (RULE + 'access_lifetime = "30s"\n', "access_lifetime must lie between 60 s and 86400 s"),
        (RULE + 'access_lifetime = "2d"\n', "access_lifetime must lie between"),
        (RULE + 'refresh_lifetime = "30m"\n', "refresh_lifetime must lie between 3600 s"),
        (RULE + 'refresh_lifetime = "400d"\n', "refresh_lifetime: a binding lives at most 366 days"),
        (RULE + "access_lifetime = 600\n", "access_lifetime is a duration"),
        (RULE + 'access_lifetime = "ten minutes"\n', "access_lifetime: a duration looks like"),
        (RULE + RULE, "two rules are named 'r'"),
    ],
)
def test_every_mistake_refuses_the_file_in_one_line(text: str, words: str) -> None:
    with pytest.raises(AccessRulesError) as raised:
        parse_access_rules(text)
    message = str(raised.value)
    assert words in message
    assert message.startswith("access.toml")
    assert "\n" not in message


def test_a_missing_file_is_no_rules_and_an_unreadable_one_an_error(tmp_path: Path) -> None:
    assert read_access_rules(tmp_path / "access.toml") is None
    broken = tmp_path / "access.toml"
    broken.write_bytes(b"\xff\xfe[[rules]]")
    with pytest.raises(AccessRulesError, match="cannot be read"):
        read_access_rules(broken)
    broken.write_text(RULE, encoding="utf-8")
    rules = read_access_rules(broken)
    assert rules is not None
    assert [rule.name for rule in rules.rules] == ["r"]


PROVIDER = (
    '[identity_provider]\nname = "Acme SSO"\nissuer = "https://acme.okta.com/"\nclient_id = "engram"\n'
    'client_secret_file = "/etc/engram/oidc-secret"\n'
)


def test_an_identity_provider_is_read_with_its_defaults() -> None:
    provider = parse_access_rules(RULE + PROVIDER).identity_provider
    assert provider is not None
    assert (provider.name, provider.issuer, provider.client_id) == ("Acme SSO", "https://acme.okta.com", "engram")
    assert provider.scopes == ("openid", "email", "profile") and provider.groups_claim == "groups"
    assert parse_access_rules(RULE).identity_provider is None


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        ('secret = "x"\n', "unknown key 'secret'"),
        ('scopes = ["email"]\n', "scopes must be a list of names including openid"),
        ('groups_claim = ""\n', "groups_claim must be a claim's name"),
    ],
)
def test_a_wrong_identity_provider_refuses_the_file(extra: str, words: str) -> None:
    with pytest.raises(AccessRulesError, match=words):
        parse_access_rules(RULE + PROVIDER + extra)


def test_an_identity_provider_over_plain_http_is_refused_unless_on_loopback() -> None:
    with pytest.raises(AccessRulesError, match="issuer must be an https"):
        parse_access_rules(RULE + PROVIDER.replace("https://acme.okta.com/", "http://acme.okta.com"))
    local = parse_access_rules(RULE + PROVIDER.replace("https://acme.okta.com/", "http://127.0.0.1:9"))
    assert local.identity_provider is not None
