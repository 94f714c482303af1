"""Connected apps: the clients people let in when they signed in (their grants), revoking one, and turning
a client away for good.

Read from the vault's sign-in tables; revoking a grant ends its refresh tokens and revokes its live access
tokens, so the client must sign its person in again; turning a client away does so for every grant it
holds, and nobody can sign in to it again.
"""

from __future__ import annotations

import re
import time

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import Response

from engram_memory.host.access.ending import end_grant, revoking_as, turn_away
from engram_memory.host.compose import open_vault
from engram_memory.host.console.context import console_of, text_field
from engram_memory.host.console.views import after_decision, render
from engram_memory.host.language.catalogue import _, ngettext
from engram_memory.host.oauth.clients import client_name

SHOWN = 500
GRANT_ID_RE = re.compile(r"^grant_[0-9a-f]{24}$")


def apps_page(request: Request) -> Response:
    console = console_of(request)
    vault = open_vault(console.paths)
    try:
        store = vault.sign_in()
        grants = store.grants()[-SHOWN:]
        names = {grant.client_id: store.client(grant.client_id) for grant in grants}
    finally:
        vault.close()
    now_ms = int(time.time() * 1000)
    rows = []
    for grant in reversed(grants):
        row = names[grant.client_id]
        name = grant.client_id if row is None else client_name(row.metadata, grant.client_id)
        status = (
            "revoked" if grant.revoked_at_ms is not None else "ended" if grant.expires_at_ms <= now_ms else "active"
        )
        turned_away = row is not None and row.revoked_at_ms is not None
        rows.append((grant, name, status, turned_away))
    return render(request, "apps.html", rows=rows, notice=request.query_params.get("notice"), active="apps")


def apps_revoke(request: Request, form: FormData) -> Response:
    console = console_of(request)
    grant_id = text_field(form, "grant_id", limit=64)
    if grant_id is None or GRANT_ID_RE.fullmatch(grant_id) is None:
        return after_decision("/apps", _("That is not a grant of this home."))
    if form.get("confirmed") != "yes":
        return render(request, "app_confirm.html", grant_id=grant_id, active="apps")
    vault = open_vault(console.paths)
    try:
        store = vault.sign_in()
        if store.grant(grant_id) is None:
            return after_decision("/apps", _("This home has no grant {grant}.").format(grant=grant_id))
        reason = f"revoked by {console.decided_by}"
        first = end_grant(
            store, revoking_as(console.engine, console.decided_by), grant_id, reason, int(time.time() * 1000)
        )
    finally:
        vault.close()
    if not first:
        return after_decision("/apps", _("{grant} was already revoked.").format(grant=grant_id))
    return after_decision(
        "/apps", _("Revoked {grant}: its client must sign its person in again.").format(grant=grant_id)
    )


def apps_turn_away(request: Request, form: FormData) -> Response:
    console = console_of(request)
    client_id = text_field(form, "client_id", limit=2048)
    if client_id is None:
        return after_decision("/apps", _("That is not a client of this home."))
    vault = open_vault(console.paths)
    try:
        store = vault.sign_in()
        if store.client(client_id) is None:
            return after_decision("/apps", _("That is not a client of this home."))
        if form.get("confirmed") != "yes":
            return render(request, "app_turn_away.html", client_id=client_id, active="apps")
        reason = f"its client was revoked by {console.decided_by}"
        first, ended = turn_away(
            store, revoking_as(console.engine, console.decided_by), client_id, reason, int(time.time() * 1000)
        )
    finally:
        vault.close()
    if not first:
        return after_decision("/apps", _("That client was already turned away."))
    return after_decision(
        "/apps",
        ngettext(
            "Turned the client away: {count} grant ended.", "Turned the client away: {count} grants ended.", ended
        ).format(count=ended),
    )
