"""Confirmations: what a withdraw or forget will destroy, who asked, the time its request has left; approve or deny.

The text about to be destroyed is shown when it can still be read (an audited host read of a current
record, or the pending candidate decrypted), so a person approves what they have seen.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import Response

from engram_memory.contract.errors import ContractError
from engram_memory.contract.tools import Tool
from engram_memory.engine.admission.review import ReviewError
from engram_memory.engine.lifecycle.gate import APPROVAL_TTL_MAX_MS, REQUEST_TTL_MS, ConfirmationError
from engram_memory.engine.ports.store import ConfirmationRow
from engram_memory.host.console.context import Console, console_of, text_field
from engram_memory.host.console.views import after_decision, fragment, live, render
from engram_memory.host.language.catalogue import _
from engram_memory.host.language.words import refusal as refusal_words
from engram_memory.host.reads import HostReadRefused, read_record

APPROVAL_CHOICES_S = (60, 120, 300)


@dataclass(frozen=True)
class Waiting:
    row: ConfirmationRow
    seconds_left: int
    texts: list[str]

    @property
    def expires_at_ms(self) -> int:
        return self.row.requested_at_ms + REQUEST_TTL_MS


def _texts(console: Console, row: ConfirmationRow) -> list[str]:
    """What the operation would destroy, in words, when it can still be read; empty otherwise."""
    try:
        if row.tool == Tool.FORGET.value:
            scope = row.scope
            record = read_record(console.engine, scope.tenant, scope.workspace, row.target, read_by=console.decided_by)
            return [str(component["text"]) for component in record["components"]]
        if row.tool == Tool.WITHDRAW.value:
            view = console.engine.candidate_view(row.target)
            return [str(component["text"]) for component in view.payload["components"]]
    except (HostReadRefused, ReviewError, ContractError):
        return []
    return []


def _waiting(request: Request) -> list[Waiting]:
    console = console_of(request)
    now_ms = int(time.time() * 1000)
    items = []
    for row, _status in console.engine.confirmations():
        left = max(0, (row.requested_at_ms + REQUEST_TTL_MS - now_ms) // 1000)
        items.append(Waiting(row, left, _texts(console, row)))
    return items


def confirmations_page(request: Request) -> Response:
    return render(
        request,
        "confirmations.html",
        items=_waiting(request),
        choices=APPROVAL_CHOICES_S,
        notice=request.query_params.get("notice"),
        active="confirmations",
    )


def confirmations_live(request: Request) -> Response:
    csrf = request.state.session.csrf_token
    items = _waiting(request)
    html = fragment("confirmation_items.html", items=items, choices=APPROVAL_CHOICES_S, csrf=csrf)
    return live(html, [item.row.confirmation_id for item in items])


def confirmation_decide(request: Request, form: FormData) -> Response:
    console = console_of(request)
    confirmation_id = text_field(form, "confirmation_id", limit=200)
    choice = form.get("decision")
    ttl = text_field(form, "ttl_s", limit=4) or str(APPROVAL_TTL_MAX_MS // 1000)
    if confirmation_id is None or choice not in ("approve", "deny") or not ttl.isdigit():
        return after_decision("/confirmations", _("Choose approve or deny for a request."))
    ttl_s = int(ttl)
    try:
        if choice == "approve":
            row = console.engine.approve_confirmation(
                confirmation_id, decided_by=console.decided_by, ttl_ms=ttl_s * 1000
            )
            said = _("Approved {request} ({tool} {target}) for {seconds} s: the agent may repeat the call.").format(
                request=row.confirmation_id, tool=row.tool, target=row.target, seconds=ttl_s
            )
        else:
            row = console.engine.deny_confirmation(confirmation_id, decided_by=console.decided_by)
            said = _("Denied {request} ({tool} {target}).").format(
                request=row.confirmation_id, tool=row.tool, target=row.target
            )
    except ConfirmationError as refused:
        return after_decision("/confirmations", _("Not decided: {reason}").format(reason=refusal_words(refused)))
    return after_decision("/confirmations", said)
