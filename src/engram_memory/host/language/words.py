"""The words for the codes the host shows people: states and statuses are stored and sent as English
identifiers (JSON output, forms and filters keep them), and a person reads them in their language."""

from __future__ import annotations

from types import MappingProxyType

from engram_memory.engine.refusals import Refused
from engram_memory.host.language.catalogue import N_, _

LABELS = MappingProxyType(
    {
        "pending": N_("pending"),
        "accepted_current": N_("current"),
        "accepted_disputed": N_("disputed"),
        "historical": N_("historical"),
        "expired": N_("expired"),
        "trust_invalid": N_("trust invalidated"),
        "tombstoned": N_("forgotten"),
        "rejected": N_("rejected"),
        "withdrawn": N_("withdrawn"),
        "active": N_("active"),
        "revoked": N_("revoked"),
        "expiring": N_("expiring (renewal due)"),
        "ended": N_("ended"),
        "approved": N_("approved"),
        "denied": N_("denied"),
        "consumed": N_("consumed"),
        "disabled": N_("disabled"),
        "enrolling": N_("enrolling"),
        "active, re-enrolling": N_("active, re-enrolling"),
        "enrolment expired": N_("enrolment expired"),
    }
)


def label(code: object) -> str:
    """The person's word for a code; an unknown code is shown as it is."""
    text = str(code)
    word = LABELS.get(text)
    return _(word) if word is not None else text


# Why the policy left a candidate for a person (the codes of `review_reasons`).
REVIEW_REASONS = MappingProxyType(
    {
        "review_mode": N_("the policy sends every candidate to review"),
        "tombstone_guard": N_("it matches text that was forgotten earlier (tombstone guard)"),
        "family_review": N_("it competes with a current memory of the same family (shown beside it)"),
        "near_duplicate": N_("it is near-identical to a current memory (shown beside it)"),
    }
)


def review_reason(reason: str) -> str:
    """A review reason for a person; `secret:<category>` names what a detector found."""
    if reason.startswith("secret:"):
        return _("the detector found {category}").format(category=reason.removeprefix("secret:"))
    known = REVIEW_REASONS.get(reason)
    return _(known) if known is not None else reason


def refusal(refused: Refused) -> str:
    """Why the engine turned a person's request down, in their language (the one wording of each refusal)."""
    return _(refused.refusal.value).format(**refused.values)
