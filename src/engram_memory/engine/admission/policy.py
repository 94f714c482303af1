"""The host's admission policy as a value: what is accepted, what waits for a human, what is refused.

The policy has an id, a version and a digest of its whole content; every decision names them, so a
decision can be checked later against the policy that made it (POLICY_STALE).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol

from engram_memory.contract.binding import TRUST_CLASSES
from engram_memory.contract.canonical import MAX_SAFE_INTEGER, POLICY_DOMAIN, CanonicalError, digest
from engram_memory.contract.instants import parse_instant
from engram_memory.engine.secrets import CATEGORIES, DEFAULT_CATEGORIES

DECISION_MAX_AGE_MS = 300_000
REDACTABLE_FIELDS = frozenset(
    {
        "provenance",
        "provenance.principal",
        "provenance.agent_id",
        "provenance.session",
        "citations.locator",
        "citations.source_ref",
        "citations.observed_at",
        "primary_event",
    }
)


class PolicyError(ValueError):
    """The policy text is not a valid policy (the host sees why; agents see POLICY_UNAVAILABLE)."""


@dataclass(frozen=True, slots=True)
class AutoAccept:
    """Who the host trusts enough to skip review in mode "review" (the `[auto_accept]` table).

    Only ever consulted after every rejection rule, the duplicate rule and the tombstone guard.
    """

    principals: frozenset[str] = frozenset()
    agents: frozenset[str] = frozenset()
    trust_classes: frozenset[str] = frozenset()

    def matches(self, *, principal: str, agent_id: str, trust_class: str) -> tuple[str, ...]:
        """The reason codes of every rule that matches, in a fixed order; empty when none does."""
        hits = (
            ("auto_accept:principal", principal in self.principals),
            ("auto_accept:agent", agent_id in self.agents),
            ("auto_accept:trust_class", trust_class in self.trust_classes),
        )
        return tuple(reason for reason, hit in hits if hit)

    def as_mapping(self) -> dict[str, list[str]]:
        return {
            "principals": sorted(self.principals),
            "agents": sorted(self.agents),
            "trust_classes": sorted(self.trust_classes),
        }


FAMILY_MODES = ("supersede", "adjudicate", "coexist")
_GLOB = frozenset("*?[")


def ref_matches(pattern: str, ref: str) -> bool:
    """A family pattern with `*`, `?` or `[` is a shell-style glob (case-sensitive); any other is the ref."""
    return fnmatch.fnmatchcase(ref, pattern) if _GLOB & set(pattern) else ref == pattern


@dataclass(frozen=True, slots=True)
class FamilyRule:
    """What an accepted memory does to the current memories of its scope that share a family with it."""

    pattern: str
    mode: Literal["supersede", "adjudicate", "coexist"]


@dataclass(frozen=True, slots=True)
class NearDuplicates:
    """The near-duplicate rule (engine/admission/near_duplicates.py): off (`accept`) unless the host asks."""

    action: Literal["accept", "review"] = "accept"
    threshold: float = 0.9
    min_terms: int = 4
    # Cosine of language-centred vectors (decision 0025): the lowest value that sends under 1 % of the turns
    # of every dev set to review (docs/benchmarks.md, "Staying true").
    semantic_threshold: float = 0.93

    def as_mapping(self) -> dict[str, Any]:
        return {
            "action": self.action,
            "threshold": self.threshold,
            "min_terms": self.min_terms,
            "semantic_threshold": self.semantic_threshold,
        }


# The widest instants a memory may name: every year from 1 to 9999 (a fact about 1950, or 1066, is
# legitimate); microseconds and nanoseconds land far beyond and are refused.
EARLIEST_MS = -62_135_596_800_000
LATEST_MS = 253_402_300_799_999
# Below this an epoch-milliseconds value is before March 1973, and reads as epoch seconds of today.
SECONDS_LOOKING_BELOW = 10**11


@dataclass(frozen=True, slots=True)
class TimeBounds:
    """Which instants `valid_time.t`, `t_end` and `primary_event.at` may hold (the `[times]` table)."""

    earliest_ms: int = EARLIEST_MS
    latest_ms: int = LATEST_MS
    # Early 1970 in milliseconds is what a value in seconds looks like: refused unless the host allows it.
    allow_seconds_range: bool = False

    def fault(self, value: int) -> str | None:
        """Why `value` is no plausible instant of this policy ("seconds" or "bounds"), or None."""
        if not self.earliest_ms <= value <= self.latest_ms:
            return "bounds"
        if 0 < value < SECONDS_LOOKING_BELOW and not self.allow_seconds_range:
            return "seconds"
        return None

    def as_mapping(self) -> dict[str, Any]:
        return {
            "earliest_ms": self.earliest_ms,
            "latest_ms": self.latest_ms,
            "allow_seconds_range": self.allow_seconds_range,
        }


@dataclass(frozen=True, slots=True)
class AdmissionPolicy:
    policy_id: str = "default"
    version: int = 1
    mode: Literal["auto", "review"] = "auto"
    min_citations: int = 1
    require_attestation: bool = False
    max_payload_bytes: int = 1_048_576
    retain_principals: frozenset[str] = frozenset()
    max_retention_days: int = 365
    consented_families: frozenset[str] = frozenset()
    secret_categories: frozenset[str] = DEFAULT_CATEGORIES
    redact_fields: tuple[str, ...] = ()
    auto_accept: AutoAccept = AutoAccept()
    family_rules: tuple[FamilyRule, ...] = ()
    near_duplicates: NearDuplicates = NearDuplicates()
    times: TimeBounds = TimeBounds()
    digest: str = field(default="", compare=False)

    def as_mapping(self) -> dict[str, Any]:
        return {
            "policy_id": self.policy_id,
            "version": self.version,
            "mode": self.mode,
            "min_citations": self.min_citations,
            "require_attestation": self.require_attestation,
            "max_payload_bytes": self.max_payload_bytes,
            "retain_principals": sorted(self.retain_principals),
            "max_retention_days": self.max_retention_days,
            "consented_families": sorted(self.consented_families),
            "secret_categories": sorted(self.secret_categories),
            "redact_fields": list(self.redact_fields),
            "auto_accept": self.auto_accept.as_mapping(),
            # Only when set, so that a policy without them keeps the digest it always had.
            **(
                {"family_rules": [{"pattern": r.pattern, "mode": r.mode} for r in self.family_rules]}
                if self.family_rules
                else {}
            ),
            **({"times": self.times.as_mapping()} if self.times != TimeBounds() else {}),
        }

    def with_digest(self) -> AdmissionPolicy:
        return replace(self, digest=digest(POLICY_DOMAIN, self.as_mapping()))

    def may_retain(self, principal: str) -> bool:
        return "*" in self.retain_principals or principal in self.retain_principals

    def consents_to(self, family_ref: str) -> bool:
        return any(ref_matches(pattern, family_ref) for pattern in self.consented_families)

    def family_mode(self, family_ref: str) -> str:
        """The first matching rule's mode; a family no rule names coexists."""
        return next((rule.mode for rule in self.family_rules if ref_matches(rule.pattern, family_ref)), "coexist")


# Retention in epoch milliseconds must stay a safe integer: about 285,000 years, so a real cap is far below.
MAX_RETENTION_DAYS = 36_500_000


def _get(data: Mapping[str, Any], key: str, kind: type, default: Any) -> Any:
    value = data.get(key, default)
    if kind is int and (isinstance(value, bool) or not isinstance(value, int)):
        raise PolicyError(f"{key} must be an integer")
    if kind is int and abs(value) > MAX_SAFE_INTEGER:
        # The policy's digest is canonical JSON, which holds safe integers only (RFC 8785).
        raise PolicyError(f"{key} must be at most 2^53 - 1")
    if not isinstance(value, kind):
        raise PolicyError(f"{key} must be a {kind.__name__}")
    return value


def _strings(data: Mapping[str, Any], key: str, name: str | None = None) -> frozenset[str]:
    value = data.get(key, [])
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise PolicyError(f"{name or key} must be a list of strings")
    return frozenset(value)


def _auto_accept(data: Mapping[str, Any]) -> AutoAccept:
    table = data.get("auto_accept", {})
    if not isinstance(table, dict):
        raise PolicyError("[auto_accept] must be a table")
    unknown = sorted(set(table) - {"principals", "agents", "trust_classes"})
    if unknown:
        raise PolicyError(f"unknown policy key: auto_accept.{unknown[0]}")
    rules = AutoAccept(
        principals=_strings(table, "principals", "auto_accept.principals"),
        agents=_strings(table, "agents", "auto_accept.agents"),
        trust_classes=_strings(table, "trust_classes", "auto_accept.trust_classes"),
    )
    # An empty name would match a binding that never named anyone: refuse it rather than guess.
    if "" in rules.principals or "" in rules.agents:
        raise PolicyError("auto_accept.principals and auto_accept.agents must not hold empty names")
    if not rules.trust_classes <= set(TRUST_CLASSES):
        raise PolicyError("auto_accept.trust_classes names a trust class other than " + ", ".join(TRUST_CLASSES))
    return rules


def _family_rules(data: Mapping[str, Any]) -> tuple[FamilyRule, ...]:
    tables = data.get("family_rules", [])
    if not isinstance(tables, list) or not all(isinstance(table, dict) for table in tables):
        raise PolicyError("family_rules must be an array of tables ([[family_rules]])")
    rules = []
    for table in tables:
        unknown = sorted(set(table) - {"pattern", "mode"})
        if unknown:
            raise PolicyError(f"unknown policy key: family_rules.{unknown[0]}")
        pattern, mode = table.get("pattern"), table.get("mode")
        if not isinstance(pattern, str) or not pattern:
            raise PolicyError("family_rules.pattern must be a non-empty string")
        if mode not in FAMILY_MODES:
            raise PolicyError("family_rules.mode must be " + ", ".join(f"'{m}'" for m in FAMILY_MODES))
        rules.append(FamilyRule(pattern, mode))
    return tuple(rules)


def _near_duplicates(data: Mapping[str, Any]) -> NearDuplicates:
    table = data.get("near_duplicates", {})
    if not isinstance(table, dict):
        raise PolicyError("[near_duplicates] must be a table")
    unknown = sorted(set(table) - {"action", "threshold", "min_terms", "semantic_threshold"})
    if unknown:
        raise PolicyError(f"unknown policy key: near_duplicates.{unknown[0]}")
    action = table.get("action", "accept")
    if action not in ("accept", "review"):
        raise PolicyError("near_duplicates.action must be 'accept' or 'review'")
    thresholds = []
    defaults = NearDuplicates()
    for key, default in (("threshold", defaults.threshold), ("semantic_threshold", defaults.semantic_threshold)):
        value = table.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 1:
            raise PolicyError(f"near_duplicates.{key} must be a number above 0 and at most 1")
        thresholds.append(float(value))
    min_terms = _get(table, "min_terms", int, 4)
    if not 1 <= min_terms <= 1000:
        raise PolicyError("near_duplicates.min_terms must be between 1 and 1000")
    return NearDuplicates(action, thresholds[0], min_terms, thresholds[1])


def _times(data: Mapping[str, Any]) -> TimeBounds:
    table = data.get("times", {})
    if not isinstance(table, dict):
        raise PolicyError("[times] must be a table")
    unknown = sorted(set(table) - {"earliest", "latest", "allow_seconds_range"})
    if unknown:
        raise PolicyError(f"unknown policy key: times.{unknown[0]}")
    bounds = []
    for key, default in (("earliest", EARLIEST_MS), ("latest", LATEST_MS)):
        value = table.get(key)
        instant = default if value is None else parse_instant(value) if isinstance(value, str) else None
        if instant is None:
            raise PolicyError(f"times.{key} must be an instant written YYYY-MM-DDTHH:mm:ss.sssZ")
        bounds.append(instant)
    if bounds[0] >= bounds[1]:
        raise PolicyError("times.earliest must be before times.latest")
    return TimeBounds(bounds[0], bounds[1], _get(table, "allow_seconds_range", bool, False))


_KEYS = frozenset(
    {
        "policy_id",
        "version",
        "mode",
        "min_citations",
        "require_attestation",
        "max_payload_bytes",
        "retain_principals",
        "max_retention_days",
        "consented_families",
        "secrets",
        "redact_fields",
        "auto_accept",
        "family_rules",
        "near_duplicates",
        "times",
    }
)


def policy_from_mapping(data: Mapping[str, Any]) -> AdmissionPolicy:
    """Parse the host's policy file content. Raises PolicyError naming the first bad key."""
    unknown = sorted(set(data) - _KEYS)
    if unknown:
        raise PolicyError(f"unknown policy key: {unknown[0]}")
    mode = _get(data, "mode", str, "auto")
    if mode not in ("auto", "review"):
        raise PolicyError("mode must be 'auto' or 'review'")
    categories = _secret_categories(data)
    redact = _strings(data, "redact_fields")
    if not redact <= REDACTABLE_FIELDS:
        raise PolicyError("redact_fields names a field that cannot be redacted")
    policy = AdmissionPolicy(
        policy_id=_get(data, "policy_id", str, "default"),
        version=_get(data, "version", int, 1),
        mode=mode,
        min_citations=_get(data, "min_citations", int, 1),
        require_attestation=_get(data, "require_attestation", bool, False),
        max_payload_bytes=_get(data, "max_payload_bytes", int, 1_048_576),
        retain_principals=_strings(data, "retain_principals"),
        max_retention_days=_get(data, "max_retention_days", int, 365),
        consented_families=_strings(data, "consented_families"),
        secret_categories=categories,
        redact_fields=tuple(sorted(redact)),
        auto_accept=_auto_accept(data),
        family_rules=_family_rules(data),
        near_duplicates=_near_duplicates(data),
        times=_times(data),
    )
    if policy.min_citations < 1 or policy.max_payload_bytes < 1 or policy.max_retention_days < 1:
        raise PolicyError("min_citations, max_payload_bytes and max_retention_days must be positive")
    if not policy.policy_id.strip() or policy.version < 1:
        raise PolicyError("policy_id must be non-empty and version a positive integer")
    if policy.max_retention_days > MAX_RETENTION_DAYS:
        raise PolicyError(f"max_retention_days must be at most {MAX_RETENTION_DAYS}")
    try:
        return policy.with_digest()
    except CanonicalError as exc:
        raise PolicyError("the policy holds text canonical JSON cannot carry (not NFC)") from exc


def _secret_categories(data: Mapping[str, Any]) -> frozenset[str]:
    """The detector's categories: the defaults, with those `[secrets]` turns on or off."""
    secrets = data.get("secrets", {})
    if not isinstance(secrets, dict):
        raise PolicyError("[secrets] must be a table")
    categories = set(DEFAULT_CATEGORIES)
    for name, enabled in secrets.items():
        if name not in CATEGORIES or not isinstance(enabled, bool):
            raise PolicyError(f"secrets.{name} must be a known category set to true or false")
        if enabled:
            categories.add(name)
        else:
            categories.discard(name)
    return frozenset(categories)


class PolicySource(Protocol):
    def current(self) -> AdmissionPolicy:
        """The policy in force now. Raises ContractError POLICY_UNAVAILABLE when it cannot be read."""
        ...


class StaticPolicySource:
    def __init__(self, policy: AdmissionPolicy | None = None) -> None:
        self._policy = (policy or AdmissionPolicy()).with_digest()

    def current(self) -> AdmissionPolicy:
        return self._policy
