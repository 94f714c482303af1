"""The admission decision: accept, reject, send to a human, or point at a duplicate.

Pure: the caller gathers the facts (including the duplicate and tombstone look-ups) inside its
transaction. The agent can never supply a decision, only ask for one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType

from engram_memory.engine.admission.policy import AdmissionPolicy


class Verdict(StrEnum):
    ACCEPT = "accept"
    REJECT = "reject"
    ADJUDICATE = "adjudication_required"
    DUPLICATE = "duplicate"


@dataclass(frozen=True, slots=True)
class CandidateFacts:
    """What the policy may look at: sizes, counts, detector categories, and who captured it.

    Who captured it comes from the host's binding at capture time (trust class included), never
    from the agent's arguments.
    """

    size_bytes: int
    citation_count: int
    has_attestation: bool
    secret_categories: tuple[str, ...]
    principal: str = ""
    agent_id: str = ""
    trust_class: str = "asserted"


@dataclass(frozen=True, slots=True)
class Decision:
    verdict: Verdict
    reasons: tuple[str, ...]
    policy_id: str
    policy_version: int
    policy_digest: str
    duplicate_of: str | None = None
    supersedes: tuple[str, ...] = ()  # current records an acceptance makes historical (families)


def decide(
    policy: AdmissionPolicy,
    facts: CandidateFacts,
    *,
    duplicate_of: str | None,
    tombstoned: bool,
    supersedes: tuple[str, ...] = (),
    weigh_against: tuple[str, ...] = (),
    near_duplicate: bool = False,
    same_text: bool = False,
) -> Decision:
    """Ordinary rejections come first and stay rejections; only a would-be acceptance is rerouted.

    The tombstone guard turns an acceptance of forgotten content into a human decision, so an agent
    cannot quietly bring back what someone chose to forget; so does a family whose rule says a person
    weighs the candidate against its current members (`weigh_against`, engine/admission/families.py), and
    a near-identical current memory (`near_duplicate`, engine/admission/near_duplicates.py).
    `supersedes` is what an acceptance makes historical; `same_text` says `duplicate_of` has the
    candidate's text rather than its payload digest.
    """

    def verdict(kind: Verdict, *reasons: str, duplicate: str | None = None) -> Decision:
        displaced = supersedes if kind is Verdict.ACCEPT else ()
        return Decision(kind, reasons, policy.policy_id, policy.version, policy.digest, duplicate, displaced)

    rejections = rejection_reasons(policy, facts)
    if rejections:
        return verdict(Verdict.REJECT, *rejections)
    if duplicate_of is not None:
        return verdict(Verdict.DUPLICATE, "duplicate_text" if same_text else "duplicate_exact", duplicate=duplicate_of)
    held = (
        ("tombstone_guard", tombstoned),
        ("family_review", bool(weigh_against)),
        ("near_duplicate", near_duplicate),
    )
    for reason, holds in held:
        if holds:
            return verdict(Verdict.ADJUDICATE, reason)
    if policy.mode == "review":
        # The host vouched for these in advance; the table means nothing in mode "auto".
        trusted = policy.auto_accept.matches(
            principal=facts.principal, agent_id=facts.agent_id, trust_class=facts.trust_class
        )
        if trusted:
            return verdict(Verdict.ACCEPT, *trusted)
        return verdict(Verdict.ADJUDICATE, "review_mode")
    return verdict(Verdict.ACCEPT, "policy_checks_passed")


# A decision's reasons as the agent and the host's review show them: rule and detector names, never text.
_SHOWN_REASONS = MappingProxyType(
    {
        "size": "policy:max_payload_bytes",
        "citations": "policy:min_citations",
        "attestation": "policy:require_attestation",
        "review_mode": "policy:review_all",
        "family_review": "policy:family_rules",
        "near_duplicate": "policy:near_duplicates",
        "tombstone_guard": "guard:tombstone",
        "duplicate_exact": "duplicate:same_payload",
        "duplicate_text": "duplicate:same_text",
        "host_review": "review:person",
        "awaiting_review": "review:awaiting_person",
    }
)
# The outcomes an answer explains; an acceptance needs no reasons.
EXPLAINED = frozenset({Verdict.REJECT, Verdict.ADJUDICATE, Verdict.DUPLICATE})


def shown_reasons(reasons: Sequence[str]) -> list[str]:
    """`secret:<category>` as it is; every other reason by the rule's name (`policy:review_all`)."""
    return [_SHOWN_REASONS.get(reason, reason) for reason in reasons]


def rejection_reasons(policy: AdmissionPolicy, facts: CandidateFacts) -> list[str]:
    """The ordinary rejection rules alone; a human reviewer cannot accept past them either."""
    rejections = [f"secret:{category}" for category in facts.secret_categories]
    if facts.size_bytes > policy.max_payload_bytes:
        rejections.append("size")
    if facts.citation_count < policy.min_citations:
        rejections.append("citations")
    if policy.require_attestation and not facts.has_attestation:
        rejections.append("attestation")
    return rejections
