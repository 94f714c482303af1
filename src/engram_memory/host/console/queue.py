"""The review queue: what the policy left for a person, decrypted, with the detectors' findings marked.

Accept and reject are plain forms (they work without JavaScript); each answers with a redirect back to
the queue and a notice naming the ids decided, never the memory's text.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import Response

from engram_memory.contract.errors import ContractError
from engram_memory.contract.payloads import primary_text
from engram_memory.engine.admission.review import CandidateView, ReviewDecision, ReviewError
from engram_memory.host.console.context import console_of, reason_field, text_field
from engram_memory.host.console.marks import Marker, Piece
from engram_memory.host.console.views import after_decision, fragment, live, render
from engram_memory.host.language.catalogue import _
from engram_memory.host.language.words import refusal as refusal_words
from engram_memory.host.language.words import review_reason
from engram_memory.host.review_decisions import PolicyUnreadable, ReviewChoice, decide

SHOWN = 50
CHOICES = frozenset(ReviewChoice)


@dataclass(frozen=True)
class Beside:
    """A current record a person weighs the candidate against, shown in the column beside it."""

    record_id: str
    label: str
    text: str


@dataclass(frozen=True)
class Shown:
    view: CandidateView
    components: list[tuple[dict[str, Any], list[Piece], bool]]
    citations: list[tuple[dict[str, Any], list[Piece], list[Piece]]]
    reasons: list[str]
    tombstone_match: bool
    primary_text: str = ""
    beside: tuple[Beside, ...] = ()
    families: bool = False


def _beside(view: CandidateView) -> tuple[Beside, ...]:
    family = [
        Beside(
            m.record_id,
            _("family {family} ({mode}): {fate}").format(
                family=m.family_ref,
                mode=m.mode,
                fate=_("superseded if accepted") if m.superseded_on_accept else _("kept unless superseded"),
            ),
            primary_text(m.payload),
        )
        for m in view.family_members
    ]
    near = [
        Beside(
            m.record_id,
            _("near-identical (similarity {similarity})").format(similarity=f"{m.similarity:.2f}")
            if m.semantic is None
            else _("near-identical (similarity {similarity}, embeddings {semantic})").format(
                similarity=f"{m.similarity:.2f}", semantic=f"{m.semantic:.2f}"
            ),
            primary_text(m.payload),
        )
        for m in view.near_matches
    ]
    return tuple(family + near)


def shown(view: CandidateView) -> Shown:
    marker, payload = Marker(view.findings), view.payload
    components = [
        (
            dict(component),
            marker.pieces(component["text"], f"payload/components/{index}/text"),
            component["component_id"] == payload["primary_component_id"],
        )
        for index, component in enumerate(payload["components"])
    ]
    citations = [
        (
            dict(citation),
            marker.pieces(citation["source_ref"], f"payload/citations/{index}/source_ref"),
            marker.pieces(citation["locator"]["value"], f"payload/citations/{index}/locator/value"),
        )
        for index, citation in enumerate(payload["citations"])
    ]
    reasons = [review_reason(reason) for reason in view.candidate.review_reasons]
    return Shown(
        view,
        components,
        citations,
        reasons,
        "tombstone_guard" in view.candidate.review_reasons,
        primary_text(payload),
        _beside(view),
        bool(view.family_members),
    )


def _waiting(request: Request) -> tuple[list[Shown], int]:
    engine = console_of(request).engine
    rows = engine.review_queue(include_unsent=False, limit=SHOWN + 1)
    views: list[Shown] = []
    for row in rows[:SHOWN]:
        try:
            views.append(shown(engine.candidate_view(row.candidate_id)))
        except ReviewError:
            continue  # decided between the listing and the read
    return views, len(rows)


def queue_page(request: Request) -> Response:
    views, total = _waiting(request)
    return render(
        request,
        "queue.html",
        items=views,
        more=total > SHOWN,
        notice=request.query_params.get("notice"),
        active="queue",
    )


def queue_live(request: Request) -> Response:
    views, total = _waiting(request)
    csrf = request.state.session.csrf_token
    html = fragment("queue_items.html", items=views, more=total > SHOWN, csrf=csrf)
    return live(html, [item.view.candidate.candidate_id for item in views])


def _said(decision: ReviewDecision) -> str:
    row = decision.candidate
    if decision.status == "accepted":
        superseded = (
            " " + _("It superseded {records}.").format(records=", ".join(decision.superseded))
            if decision.superseded
            else ""
        )
        return (
            _("Accepted {candidate} as record {record}.").format(candidate=row.candidate_id, record=decision.record_id)
            + superseded
        )
    if decision.status == "duplicate_exact":
        return _("Accepted {candidate} as a duplicate of the current record {record}.").format(
            candidate=row.candidate_id, record=decision.record_id
        )
    return _("Rejected {candidate}: its body is destroyed.").format(candidate=row.candidate_id)


def queue_decide(request: Request, form: FormData) -> Response:
    console = console_of(request)
    candidate_id = text_field(form, "candidate_id", limit=200)
    choice = form.get("decision")
    if candidate_id is None or choice not in CHOICES:
        return after_decision("/queue", _("Choose accept or reject for a candidate."))
    reason = reason_field(form)
    try:
        decision = decide(
            console.engine,
            console.paths.policy,
            candidate_id,
            ReviewChoice(str(choice)),
            decided_by=console.decided_by,
            reason_ref=reason,
        )
    except PolicyUnreadable as unreadable:
        return after_decision("/queue", str(unreadable))
    except ReviewError as refused:
        return after_decision("/queue", _("Not decided: {reason}").format(reason=refusal_words(refused)))
    except ContractError as fault:
        return after_decision("/queue", _("Not decided: {code}.").format(code=fault.code.value))
    return after_decision("/queue", _said(decision))
