"""Access rules: what a signed-in person's agents may do, decided by the host from identity claims alone.

A client (Claude, an IDE, a script) never chooses its tenant, workspace or tools: when a person signs in,
the first rule whose conditions all hold for their verified claims decides the binding their client's
tokens carry, and a person no rule admits is refused. The rules are host-written (`access.toml` beside
`policy.toml`, parsed by rules_file.py) and read the same way by the authorization server, by resource-server
mode and by `engram-memory access check`.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Identity:
    """Who signed in, as their identity provider (or this host's own accounts) vouched for them."""

    issuer: str
    subject: str
    email: str | None = None
    email_verified: bool = False
    groups: frozenset[str] = frozenset()

    @property
    def email_domain(self) -> str | None:
        """The domain of a verified email only: an unverified address proves nothing about its domain."""
        if self.email is None or not self.email_verified or "@" not in self.email:
            return None
        return self.email.rsplit("@", 1)[1].lower()

    @property
    def principal(self) -> str:
        """The name the person's calls carry: their verified email, or their subject at their issuer
        (stable at the provider even when no email is shared)."""
        if self.email is not None and self.email_verified:
            return self.email.lower()
        return f"{self.subject}@{self.issuer}" if self.issuer else self.subject


@dataclass(frozen=True, slots=True)
class Conditions:
    """Every condition given must hold; within one, any listed value will do. None: not a condition."""

    issuers: frozenset[str] | None = None
    subjects: frozenset[str] | None = None
    emails: frozenset[str] | None = None
    email_domains: frozenset[str] | None = None
    groups: frozenset[str] | None = None

    def hold_for(self, identity: Identity) -> bool:
        verified_email = identity.email.lower() if identity.email and identity.email_verified else None
        checks = (
            (self.issuers, identity.issuer in (self.issuers or ())),
            (self.subjects, identity.subject in (self.subjects or ())),
            (self.emails, verified_email in (self.emails or ())),
            (self.email_domains, identity.email_domain in (self.email_domains or ())),
            (self.groups, not identity.groups.isdisjoint(self.groups or ())),
        )
        return all(passed for condition, passed in checks if condition is not None)


@dataclass(frozen=True, slots=True)
class Access:
    """What a matching rule grants: the scope and limits of every binding a person's clients receive."""

    tenant: str
    workspaces: tuple[str, ...]  # the first is the one a client gets when it names none
    grants: frozenset[str]  # tool names (engram_memory_search, ...)
    purpose: str
    confirm_mutations: bool
    trust_class: str
    access_lifetime_s: int
    refresh_lifetime_s: int


@dataclass(frozen=True, slots=True)
class Rule:
    name: str
    conditions: Conditions
    access: Access | None  # None: the rule refuses whom it matches


@dataclass(frozen=True, slots=True)
class Decision:
    """The outcome for one identity: the rule that decided (None when none matched) and its access
    (None when refused)."""

    rule: str | None
    access: Access | None = field(default=None)

    @property
    def refused(self) -> bool:
        return self.access is None


@dataclass(frozen=True, slots=True)
class IdentityProvider:
    """The team's OpenID Connect provider people may sign in with, beside accounts on this host."""

    name: str  # the sign-in button's label
    issuer: str
    client_id: str
    client_secret_file: str  # the secret stays out of access.toml
    scopes: tuple[str, ...] = ("openid", "email", "profile")
    groups_claim: str = "groups"


@dataclass(frozen=True, slots=True)
class AccessRules:
    rules: tuple[Rule, ...]
    identity_provider: IdentityProvider | None = None

    def decide(self, identity: Identity) -> Decision:
        """The first rule whose conditions hold decides; none holding refuses."""
        for rule in self.rules:
            if rule.conditions.hold_for(identity):
                return Decision(rule=rule.name, access=rule.access)
        return Decision(rule=None)
