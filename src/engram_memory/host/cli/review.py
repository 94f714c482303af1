"""Host commands for the review queue: review list|show|accept|reject (issue 3, item 2).

`show` is the one command whose purpose is to put a candidate's text in front of the host: it decrypts
the body and marks every span a secret detector points at, so the person deciding sees what the policy
would see (and personal data besides).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import MappingProxyType
from typing import Annotated, Any

import typer
from rich import box
from rich.table import Table
from rich.text import Text

from engram_memory.contract.errors import ContractError, ErrorCode
from engram_memory.contract.instants import format_instant
from engram_memory.engine.admission.review import (
    CandidateDecided,
    FamilyMember,
    ReviewDecision,
    ReviewError,
)
from engram_memory.engine.ports.store import CandidateRow
from engram_memory.host.cli.common import HomeOption, JsonOption, fail, note_cut_off, opened_engine, out, say
from engram_memory.host.cli.review_show import render
from engram_memory.host.compose import current_user
from engram_memory.host.language.catalogue import N_, _, ngettext
from engram_memory.host.language.formats import number, when
from engram_memory.host.language.words import refusal as refusal_words
from engram_memory.host.language.words import review_reason
from engram_memory.host.review_decisions import PolicyUnreadable, ReviewChoice, decide
from engram_memory.host.terminal import inline

IdArgument = Annotated[str, typer.Argument(metavar="ID", help="A candidate id from `review list`.")]
ReasonOption = Annotated[
    str | None, typer.Option("--reason", help="Why, as a ref kept in the journal (a ticket id, not prose).")
]
_REASONS = MappingProxyType(
    {
        ErrorCode.POLICY_UNAVAILABLE: N_("policy.toml cannot be read; fix it, then decide again"),
        ErrorCode.POLICY_STALE: N_("the policy changed while deciding; run the command again"),
        ErrorCode.BLOB_MISSING: N_("the candidate's sealed body or its data key is gone"),
        ErrorCode.MUTATION_OUTCOME_UNKNOWN: N_(
            "the store could not confirm the commit; `review list --all` shows whether the candidate is still pending"
        ),
    }
)
_UNAVAILABLE = N_("the store is unavailable")


def register(app: typer.Typer) -> None:
    """Adds this module's commands to the main `engram-memory` app."""
    review_app = typer.Typer(
        rich_markup_mode=None, help="The admission review queue: what the policy left for a human to decide."
    )
    app.add_typer(review_app, name="review")
    review_app.command("list")(review_list)
    review_app.command("show")(review_show)
    review_app.command("accept")(review_accept)
    review_app.command("reject")(review_reject)


@contextmanager
def _refusals() -> Iterator[None]:
    """Host-side refusals and contract faults as one line each, naming the code where there is one."""
    try:
        yield
    except ReviewError as exc:
        fail(refusal_words(exc))
    except ContractError as exc:
        fail(f"{exc.code.value}: {_(_REASONS.get(exc.code, _UNAVAILABLE))}")


def _when(epoch_ms: int) -> str:
    try:
        return format_instant(epoch_ms)
    except (OverflowError, ValueError, OSError):
        return f"{epoch_ms} ms"


def _candidate_json(row: CandidateRow) -> dict[str, Any]:
    return {
        "candidate_id": row.candidate_id,
        "state": row.state,
        "in_review": row.adjudication,
        "tenant": row.scope.tenant,
        "workspace": row.scope.workspace,
        "principal": row.actor.principal,
        "agent_id": row.actor.agent_id,
        "session": row.actor.session,
        "trust_class": row.trust_class,
        "captured_at": _when(row.captured_at_ms),
        "review_reasons": list(row.review_reasons),
        "size_bytes": row.size_bytes,
        "citation_count": row.citation_count,
        "secret_categories": list(row.secret_categories),
    }


# -- review list ----------------------------------------------------------------------------------


def review_list(
    include_all: Annotated[
        bool, typer.Option("--all", help="Also list pending candidates no agent has asked admission for.")
    ] = False,
    limit: Annotated[int, typer.Option("--limit", min=1, max=10_000, help="At most this many, oldest first.")] = 100,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """List candidates waiting for a human, oldest first (metadata only; nothing is decrypted)."""
    with opened_engine(home) as (engine, _paths), _refusals():
        # One more than asked, to tell the host whether the list was cut short.
        rows = engine.review_queue(include_unsent=include_all, limit=limit + 1)
    items = [_candidate_json(row) for row in rows[:limit]]
    if len(rows) > limit:
        note_cut_off(limit, _("candidates (oldest first)"))
    if as_json:
        sys.stdout.write(json.dumps(items) + "\n")
        return
    if not items:
        say(_("no candidates waiting for review") if not include_all else _("no pending candidates"))
        return
    # Two columns keep the id whole at 80 columns; the details fold under it, one fact per line.
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    table.add_column(_("candidate"), no_wrap=True)
    table.add_column(_("details"), overflow="fold")
    for number_of, item in enumerate(items, start=1):
        why = ", ".join(review_reason(reason) for reason in item["review_reasons"]) or (
            _("in review") if item["in_review"] else _("not sent to review")
        )
        if item["secret_categories"]:
            why += _("; secrets: {categories}").format(categories=", ".join(item["secret_categories"]))
        size = ngettext(
            "{why}; {size} bytes, {count} citation", "{why}; {size} bytes, {count} citations", item["citation_count"]
        )
        lines = [
            size.format(why=why, size=number(item["size_bytes"]), count=item["citation_count"]),
            f"{item['principal']} ({item['trust_class']}), {item['agent_id']}, {item['session']}",
            f"{item['tenant']}/{item['workspace']}, {when(rows[number_of - 1].captured_at_ms)}",
        ]
        details = "\n".join(inline(line) for line in lines) + ("\n" if number_of < len(items) else "")
        table.add_row(Text(inline(item["candidate_id"])), Text(details))
    out.print(table)


# -- review show ----------------------------------------------------------------------------------


def _member_json(member: FamilyMember) -> dict[str, Any]:
    return {
        "family_ref": member.family_ref,
        "mode": member.mode,
        "record_id": member.record_id,
        "valid_from": _when(member.valid_from_ms),
        "superseded_on_accept": member.superseded_on_accept,
        "payload": member.payload,
    }


def _show_decided(decided: CandidateDecided, *, as_json: bool) -> None:
    if as_json:
        document = {"candidate": _candidate_json(decided.candidate), "reasons": list(decided.reasons)}
        sys.stdout.write(json.dumps(document) + "\n")
        return
    row = decided.candidate
    say(
        _("candidate {id}: {state}; its body is gone, nothing else to show").format(
            id=row.candidate_id, state=row.state
        )
    )
    say(_("  reasons    {reasons}").format(reasons=", ".join(decided.reasons) or _("none recorded")))
    say(_("  scope      {tenant}/{workspace}").format(tenant=row.scope.tenant, workspace=row.scope.workspace))
    say(
        _("  captured   {at} by {principal}, agent {agent}").format(
            at=when(row.captured_at_ms), principal=row.actor.principal, agent=row.actor.agent_id
        )
    )


def review_show(candidate_id: IdArgument, home: HomeOption = None, as_json: JsonOption = False) -> None:
    """Decrypt one pending candidate for the human, with what the secret detector found marked; for a
    decided one, its state and the reasons of the decision (its body is gone)."""
    with opened_engine(home) as (engine, _paths), _refusals():
        try:
            view = engine.candidate_view(candidate_id)
        except CandidateDecided as decided:
            _show_decided(decided, as_json=as_json)
            return
    if as_json:
        document = {
            "candidate": _candidate_json(view.candidate),
            "payload": view.payload,
            "evidence": view.evidence,
            "findings": [
                {"category": f.category, "path": f.path, "start": f.start, "end": f.end} for f in view.findings
            ],
            "family_members": [_member_json(member) for member in view.family_members],
            "near_matches": [
                {"record_id": m.record_id, "similarity": m.similarity, "semantic": m.semantic, "payload": m.payload}
                for m in view.near_matches
            ],
        }
        sys.stdout.write(json.dumps(document) + "\n")
        return
    render(view, terminal=out.is_terminal)


# -- review accept / reject -----------------------------------------------------------------------


def _decision_json(decision: ReviewDecision) -> dict[str, Any]:
    return {
        "candidate_id": decision.candidate.candidate_id,
        "status": decision.status,
        "record_id": decision.record_id,
        "reasons": list(decision.reasons),
        "tenant": decision.candidate.scope.tenant,
        "workspace": decision.candidate.scope.workspace,
        "cursor": decision.cursor,
        "event_id": decision.event_id,
        "decision_receipt_digest": decision.decision_receipt_digest,
        "decided_by": decision.decided_by,
        "decided_at": _when(decision.decided_at_ms),
        "answers_rewritten": decision.answers_rewritten,
        "key_destruction": "complete" if decision.key_destroyed else "pending",
        "superseded_record_ids": list(decision.superseded),
    }


def _decide(candidate_id: str, home: Path | None, choice: ReviewChoice, *, reason: str | None, as_json: bool) -> None:
    with opened_engine(home) as (engine, paths), _refusals():
        try:
            decision = decide(engine, paths.policy, candidate_id, choice, decided_by=current_user(), reason_ref=reason)
        except PolicyUnreadable as unreadable:
            fail(str(unreadable))
    if as_json:
        sys.stdout.write(json.dumps(_decision_json(decision)) + "\n")
        return
    row = decision.candidate
    where = _("{tenant}/{workspace}, cursor {cursor}").format(
        tenant=row.scope.tenant, workspace=row.scope.workspace, cursor=decision.cursor
    )
    if decision.status == "accepted":
        say(
            _("accepted {candidate_id} as record {record_id} ({where})").format(
                candidate_id=row.candidate_id, record_id=decision.record_id, where=where
            )
        )
    elif decision.status == "duplicate_exact":
        say(
            _("accepted {candidate_id} as a duplicate of the current record {record_id} ({where})").format(
                candidate_id=row.candidate_id, record_id=decision.record_id, where=where
            )
        )
    else:
        say(
            _("rejected {candidate_id} ({where}): its body is destroyed").format(
                candidate_id=row.candidate_id, where=where
            )
        )
    for record_id in decision.superseded:
        say(
            _("record {record_id} is now historical, superseded by {successor}").format(
                record_id=record_id, successor=decision.record_id
            )
        )
    if decision.answers_rewritten:
        say(
            _("the agent's {answers_rewritten} waiting admission answer(s) now replay this decision").format(
                answers_rewritten=decision.answers_rewritten
            )
        )
    if not decision.key_destroyed:
        say(_("the candidate's data key is not destroyed yet (the key vault was busy); it is swept later"))


def review_accept(
    candidate_id: IdArgument,
    reason: ReasonOption = None,
    supersede: Annotated[
        bool,
        typer.Option(
            "--supersede", help="Make every current record of the candidate's families historical (see review show)."
        ),
    ] = False,
    keep_both: Annotated[
        bool, typer.Option("--keep-both", help="Keep every current record of its families current beside it.")
    ] = False,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Accept one pending candidate: it becomes a searchable record (or points at an identical one).

    Without --supersede or --keep-both, the policy's family rules decide what it supersedes."""
    if supersede and keep_both:
        fail(_("choose one of --supersede and --keep-both"))
    choice = (
        ReviewChoice.ACCEPT_SUPERSEDE if supersede else (ReviewChoice.ACCEPT_KEEP if keep_both else ReviewChoice.ACCEPT)
    )
    _decide(candidate_id, home, choice, reason=reason, as_json=as_json)


def review_reject(
    candidate_id: IdArgument, reason: ReasonOption = None, home: HomeOption = None, as_json: JsonOption = False
) -> None:
    """Reject one pending candidate: its body and data key are destroyed."""
    _decide(candidate_id, home, ReviewChoice.REJECT, reason=reason, as_json=as_json)
