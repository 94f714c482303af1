"""A person's review decision as both the CLI and the console take it: the choice, and the policy read first.

A decision names the policy in force, so the host reads policy.toml before deciding and says in the
person's words why it cannot (the engine would only answer POLICY_UNAVAILABLE). The choices map to the
engine's `supersede` once, here.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path

from engram_memory.engine.admission.policy import PolicyError
from engram_memory.engine.admission.review import ReviewDecision
from engram_memory.engine.host_front import HostFront
from engram_memory.host.language.catalogue import _
from engram_memory.host.policy_file import read_policy

__all__ = ["PolicyUnreadable", "ReviewChoice", "decide", "supersede_of"]


class ReviewChoice(StrEnum):
    ACCEPT = "accept"
    ACCEPT_SUPERSEDE = "accept_supersede"
    ACCEPT_KEEP = "accept_keep"
    REJECT = "reject"


class PolicyUnreadable(Exception):
    """policy.toml cannot be read or used; the message says why, in the person's language, naming the file
    but not where it lies (the console's visitors need not learn the host's folders)."""


def supersede_of(choice: ReviewChoice) -> bool | None:
    """The engine's `supersede` for an acceptance: True or False overrides the policy's family rules."""
    return {ReviewChoice.ACCEPT_SUPERSEDE: True, ReviewChoice.ACCEPT_KEEP: False}.get(choice)


def _require_policy(path: Path) -> None:
    try:
        read_policy(path)
    except PolicyError as exc:
        raise PolicyUnreadable(
            _("POLICY_UNAVAILABLE: {reason} ({path}); fix it, then decide again").format(reason=exc, path=path.name)
        ) from None
    except OSError as exc:
        raise PolicyUnreadable(
            _("POLICY_UNAVAILABLE: cannot read {path} ({strerror}); fix it, then decide again").format(
                path=path.name, strerror=exc.strerror
            )
        ) from None


def decide(
    engine: HostFront,
    policy: Path,
    candidate_id: str,
    choice: ReviewChoice,
    *,
    decided_by: str,
    reason_ref: str | None,
) -> ReviewDecision:
    """Raises PolicyUnreadable, ReviewError (the engine's refusal) or ContractError."""
    _require_policy(policy)
    if choice is ReviewChoice.REJECT:
        return engine.reject_candidate(candidate_id, decided_by=decided_by, reason_ref=reason_ref)
    return engine.accept_candidate(
        candidate_id, decided_by=decided_by, reason_ref=reason_ref, supersede=supersede_of(choice)
    )
