"""Bindings: what this home issued (claims, grants, expiry, revocation; never a token), and revoking one."""

from __future__ import annotations

import time

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import Response

from engram_memory.engine.host_front import UnknownBinding
from engram_memory.engine.ports.rows import IssuedBindingRow
from engram_memory.host.bindings import SIGNED_IN, TOKEN_ID_RE, renewal_due
from engram_memory.host.console.context import console_of, text_field
from engram_memory.host.console.views import after_decision, render
from engram_memory.host.language.catalogue import _

SHOWN = 500


def bindings_page(request: Request) -> Response:
    found = console_of(request).engine.bindings(SHOWN + 1, latest_only_for=SIGNED_IN)
    now_ms = int(time.time() * 1000)
    rows = [
        (issued, revocation, _status(issued, revocation is not None, now_ms)) for issued, revocation in found[:SHOWN]
    ]
    return render(
        request,
        "bindings.html",
        rows=rows,
        more=len(found) > SHOWN,
        notice=request.query_params.get("notice"),
        active="bindings",
    )


def _status(issued: IssuedBindingRow, revoked: bool, now_ms: int) -> str:
    """As `bindings list` words it: revoked, expired, expiring (renewal due) or active."""
    if revoked:
        return "revoked"
    if now_ms >= issued.expires_at_ms:
        return "expired"
    return "expiring" if renewal_due(issued.issued_at_ms, issued.expires_at_ms, now_ms) else "active"


def bindings_revoke(request: Request, form: FormData) -> Response:
    console = console_of(request)
    token_id = text_field(form, "token_id", limit=64)
    if token_id is None or TOKEN_ID_RE.fullmatch(token_id) is None:
        return after_decision("/bindings", _("That is not a token id of this home."))
    if form.get("confirmed") != "yes":
        return render(request, "binding_confirm.html", token_id=token_id, active="bindings")
    try:
        revocation = console.engine.revoke_token(token_id, revoked_by=console.decided_by)
    except UnknownBinding:
        return after_decision("/bindings", _("This home issued no binding {token}.").format(token=token_id))
    if revocation.already:
        return after_decision("/bindings", _("{token} was already revoked.").format(token=token_id))
    return after_decision(
        "/bindings", _("Revoked {token}: its calls now answer AUTHORIZATION_REVOKED.").format(token=token_id)
    )
