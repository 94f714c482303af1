"""Host commands for the review queue: review list|show|accept|reject (issue 3, item 2).

`show` is the one command whose purpose is to put a candidate's text in front of the host: it decrypts
the body and marks every span a secret detector points at, so the person deciding sees what the policy
would see (and personal data besides).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich import box
from rich.table import Table
from rich.text import Text

from engram_memory.contract.errors import ContractError, ErrorCode
from engram_memory.contract.instants import format_instant
from engram_memory.contract.payloads import primary_text
from engram_memory.engine.admission.policy import PolicyError
from engram_memory.engine.admission.review import (
    CandidateDecided,
    CandidateView,
    FamilyMember,
    ReviewDecision,
    ReviewError,
)
from engram_memory.engine.ports.store import CandidateRow
from engram_memory.engine.secrets import SecretFinding
from engram_memory.host.cli.common import HomeOption, JsonOption, fail, note_cut_off, opened_engine, out, say
from engram_memory.host.compose import current_user
from engram_memory.host.finding_spans import merged_spans
from engram_memory.host.policy_file import read_policy
from engram_memory.host.terminal import inline, printable

IdArgument = Annotated[str, typer.Argument(metavar="ID", help="A candidate id from `review list`.")]
ReasonOption = Annotated[
    str | None, typer.Option("--reason", help="Why, as a ref kept in the journal (a ticket id, not prose).")
]
_MARK_STYLE = "bold white on red"
_REASONS = {
    ErrorCode.POLICY_UNAVAILABLE: "policy.toml cannot be read; fix it, then decide again",
    ErrorCode.POLICY_STALE: "the policy changed while deciding; run the command again",
    ErrorCode.BLOB_MISSING: "the candidate's sealed body or its data key is gone",
    ErrorCode.MUTATION_OUTCOME_UNKNOWN: "the store could not confirm the commit; `review list --all` shows "
    "whether the candidate is still pending",
}


def register(app: typer.Typer) -> None:
    """Adds this module's commands to the main `engram-memory` app."""
    review_app = typer.Typer(help="The admission review queue: what the policy left for a human to decide.")
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
        fail(str(exc))
    except ContractError as exc:
        fail(f"{exc.code.value}: {_REASONS.get(exc.code, 'the store is unavailable')}")


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
    with opened_engine(home) as (engine, _), _refusals():
        # One more than asked, to tell the host whether the list was cut short.
        rows = engine.review_queue(include_unsent=include_all, limit=limit + 1)
    items = [_candidate_json(row) for row in rows[:limit]]
    if len(rows) > limit:
        note_cut_off(limit, "candidates (oldest first)")
    if as_json:
        sys.stdout.write(json.dumps(items) + "\n")
        return
    if not items:
        say("no candidates waiting for review" if not include_all else "no pending candidates")
        return
    # Two columns keep the id whole at 80 columns; the details fold under it, one fact per line.
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    table.add_column("candidate", no_wrap=True)
    table.add_column("details", overflow="fold")
    for number, item in enumerate(items, start=1):
        why = ", ".join(item["review_reasons"]) or ("in review" if item["in_review"] else "not sent to review")
        if item["secret_categories"]:
            why += "; secrets: " + ", ".join(item["secret_categories"])
        lines = [
            f"{why}; {item['size_bytes']} bytes, {item['citation_count']} citation(s)",
            f"{item['principal']} ({item['trust_class']}), {item['agent_id']}, {item['session']}",
            f"{item['tenant']}/{item['workspace']}, {item['captured_at']}",
        ]
        details = "\n".join(inline(line) for line in lines) + ("\n" if number < len(items) else "")
        table.add_row(Text(inline(item["candidate_id"])), Text(details))
    out.print(table)


# -- review show ----------------------------------------------------------------------------------


def _say(text: str) -> None:
    """One line of the rendering; ids and refs an agent chose are opaque strings, so they are escaped too."""
    say(text)


class _Renderer:
    """Prints the decrypted candidate; a span a detector found is highlighted (marked in plain text)."""

    def __init__(self, findings: Sequence[SecretFinding], *, terminal: bool) -> None:
        self._terminal = terminal
        self._by_path: dict[str, list[SecretFinding]] = {}
        for finding in findings:
            self._by_path.setdefault(finding.path, []).append(finding)

    def marked(self, value: str, path: str, *, lines: bool = True) -> Text:
        text, position = Text(), 0
        for start, end, categories in merged_spans(self._by_path.get(path, [])):
            text.append(printable(value[position:start], lines=lines))
            names = ", ".join(categories)
            if self._terminal:
                text.append(printable(value[start:end], lines=lines), style=_MARK_STYLE)
                text.append(f" [{names}]", style="bold red")
            else:
                text.append(f"[[{names}: {printable(value[start:end], lines=lines)}]]")
            position = end
        text.append(printable(value[position:], lines=lines))
        return text

    def line(self, label: str, value: str, path: str, indent: int = 2) -> None:
        text = Text(" " * indent + printable(label, lines=False) + " ")
        text.append_text(self.marked(value, path, lines=False))
        out.print(text)

    def block(self, value: str, path: str, indent: int = 6) -> None:
        for part in self.marked(value, path).split("\n"):
            out.print(Text(" " * indent).append_text(part))


def _render(view: CandidateView, *, terminal: bool) -> None:
    row, payload, evidence = view.candidate, view.payload, view.evidence
    show = _Renderer(view.findings, terminal=terminal)
    state = "waiting for review" if row.adjudication else "not sent to review"
    reasons = f" ({', '.join(row.review_reasons)})" if row.review_reasons else ""
    _say(f"candidate {row.candidate_id}: {row.state}, {state}{reasons}")
    _say(f"  scope      {row.scope.tenant}/{row.scope.workspace}")
    _say(
        f"  captured   {_when(row.captured_at_ms)} by {row.actor.principal}, agent {row.actor.agent_id},"
        f" session {row.actor.session}, trust {row.trust_class}"
    )
    attested = "yes" if row.has_attestation else "no"
    _say(f"  size       {row.size_bytes} bytes, {row.citation_count} citation(s), attestation {attested}")
    _say(f"  at capture the policy's detector saw: {', '.join(row.secret_categories) or 'nothing'}")
    if view.findings:
        _say(f"  secret findings now (every category, personal data included): {len(view.findings)}")
        for finding in view.findings:
            _say(f"    {finding.category} at {finding.path} [{finding.start}:{finding.end}]")
    else:
        _say("  secret findings now (every category, personal data included): none")

    _say("")
    show.line("purpose", payload["purpose_ref"], "payload/purpose_ref", 0)
    valid = payload["valid_time"]
    until = _when(valid["t_end"]) if "t_end" in valid else "open"
    _say(f"valid      {_when(valid['t'])} .. {until}")
    event = payload["primary_event"]
    show.line("primary event", event["type_ref"], "payload/primary_event/type_ref", 0)
    _say(f"  at {_when(event['at'])}, cites {event['citation_id']}")

    _say("")
    _say("components")
    for index, component in enumerate(payload["components"]):
        primary = ", primary" if component["component_id"] == payload["primary_component_id"] else ""
        base = f"payload/components/{index}"
        show.line("-", component["component_id"], f"{base}/component_id")
        _say(f"    {component['kind']}{primary}; cites {', '.join(component['citation_ids'])}")
        show.block(component["text"], f"{base}/text")
    _say("citations")
    for index, citation in enumerate(payload["citations"]):
        base = f"payload/citations/{index}"
        show.line("-", citation["citation_id"], f"{base}/citation_id")
        show.line("source", citation["source_ref"], f"{base}/source_ref", 4)
        locator = citation["locator"]
        show.line(f"locator ({locator['scheme']})", locator["value"], f"{base}/locator/value", 4)
        _say(f"    content {citation['content_digest']}")
        if "observed_at" in citation:
            _say(f"    observed {citation['observed_at']}")
    _render_terms(payload)
    _render_family(view)
    _render_near(view)
    _say("evidence")
    show.line("ref", evidence["evidence_ref"], "evidence/evidence_ref")
    _say(f"  digest {evidence['evidence_digest']}; cites {', '.join(evidence['citation_ids'])}")
    if "attestation" in evidence:
        _say("  attestation")
        show.block(evidence["attestation"], "evidence/attestation", 4)


def _render_terms(payload: Mapping[str, Any]) -> None:
    retention = payload["retention"]
    expiry = f", expires {retention['expires_at']}" if "expires_at" in retention else ""
    _say(f"retention  {retention['derivative_rule']}{expiry}")
    families = payload["reconciliation"]["family_refs"]
    _say(f"reconciliation families: {', '.join(families) or 'none'}")


def _member_json(member: FamilyMember) -> dict[str, Any]:
    return {
        "family_ref": member.family_ref,
        "mode": member.mode,
        "record_id": member.record_id,
        "valid_from": _when(member.valid_from_ms),
        "superseded_on_accept": member.superseded_on_accept,
        "payload": member.payload,
    }


def _beside(title: str, rows: list[tuple[Text, Text]]) -> None:
    """The candidate beside each current record a person weighs it against, in two columns."""
    if not rows:
        return
    _say("")
    _say(title)
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    table.add_column("this candidate", overflow="fold", ratio=1)
    table.add_column("current record", overflow="fold", ratio=1)
    for row in rows:
        table.add_row(*row)
    out.print(table)


def _similarity(lexical: float, semantic: float | None) -> str:
    return f"similarity {lexical:.2f}" + ("" if semantic is None else f", embeddings {semantic:.2f}")


def _render_near(view: CandidateView) -> None:
    mine = Text(printable(primary_text(view.payload)))
    rows = [
        (
            mine,
            Text(inline(f"{m.record_id} ({_similarity(m.similarity, m.semantic)})") + "\n")
            + Text(printable(primary_text(m.payload))),
        )
        for m in view.near_matches
    ]
    _beside("near-identical current memories (review accept keeps both; or reject)", rows)


def _render_family(view: CandidateView) -> None:
    mine = Text(f"valid from {_when(view.payload['valid_time']['t'])}\n") + Text(printable(primary_text(view.payload)))
    rows = []
    for member in view.family_members:
        fate = "superseded if accepted" if member.superseded_on_accept else "kept unless --supersede"
        head = f"{member.record_id} ({member.family_ref}: {member.mode}; {fate})"
        other = Text(inline(head) + f"\nvalid from {_when(member.valid_from_ms)}\n")
        rows.append((mine, other + Text(printable(primary_text(member.payload)))))
    _beside("current memories of the same families (review accept --supersede | --keep-both, or reject)", rows)


def _show_decided(decided: CandidateDecided, *, as_json: bool) -> None:
    if as_json:
        document = {"candidate": _candidate_json(decided.candidate), "reasons": list(decided.reasons)}
        sys.stdout.write(json.dumps(document) + "\n")
        return
    row = decided.candidate
    _say(f"candidate {row.candidate_id}: {row.state}; its body is gone, nothing else to show")
    _say(f"  reasons    {', '.join(decided.reasons) or 'none recorded'}")
    _say(f"  scope      {row.scope.tenant}/{row.scope.workspace}")
    _say(f"  captured   {_when(row.captured_at_ms)} by {row.actor.principal}, agent {row.actor.agent_id}")


def review_show(candidate_id: IdArgument, home: HomeOption = None, as_json: JsonOption = False) -> None:
    """Decrypt one pending candidate for the human, with what the secret detector found marked; for a
    decided one, its state and the reasons of the decision (its body is gone)."""
    with opened_engine(home) as (engine, _), _refusals():
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
    _render(view, terminal=out.is_terminal)


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


def _require_policy(path: Path) -> None:
    """A decision names the policy in force; say why there is none in the host's own words first."""
    try:
        read_policy(path)
    except PolicyError as exc:
        fail(f"POLICY_UNAVAILABLE: {exc} ({path}); fix it, then decide again")
    except OSError as exc:
        fail(f"POLICY_UNAVAILABLE: cannot read {path} ({exc.strerror}); fix it, then decide again")


def _decide(
    candidate_id: str,
    home: Path | None,
    *,
    accept: bool,
    reason: str | None,
    as_json: bool,
    supersede: bool | None = None,
) -> None:
    with opened_engine(home) as (engine, paths), _refusals():
        _require_policy(paths.policy)
        if accept:
            decision = engine.accept_candidate(
                candidate_id, decided_by=current_user(), reason_ref=reason, supersede=supersede
            )
        else:
            decision = engine.reject_candidate(candidate_id, decided_by=current_user(), reason_ref=reason)
    if as_json:
        sys.stdout.write(json.dumps(_decision_json(decision)) + "\n")
        return
    row = decision.candidate
    where = f"{row.scope.tenant}/{row.scope.workspace}, cursor {decision.cursor}"
    if decision.status == "accepted":
        say(f"accepted {row.candidate_id} as record {decision.record_id} ({where})")
    elif decision.status == "duplicate_exact":
        say(f"accepted {row.candidate_id} as a duplicate of the current record {decision.record_id} ({where})")
    else:
        say(f"rejected {row.candidate_id} ({where}): its body is destroyed")
    for record_id in decision.superseded:
        say(f"record {record_id} is now historical, superseded by {decision.record_id}")
    if decision.answers_rewritten:
        say(f"the agent's {decision.answers_rewritten} waiting admission answer(s) now replay this decision")
    if not decision.key_destroyed:
        say("the candidate's data key is not destroyed yet (the key vault was busy); it is swept later")


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
        fail("choose one of --supersede and --keep-both")
    choice = True if supersede else (False if keep_both else None)
    _decide(candidate_id, home, accept=True, reason=reason, as_json=as_json, supersede=choice)


def review_reject(
    candidate_id: IdArgument, reason: ReasonOption = None, home: HomeOption = None, as_json: JsonOption = False
) -> None:
    """Reject one pending candidate: its body and data key are destroyed."""
    _decide(candidate_id, home, accept=False, reason=reason, as_json=as_json)
