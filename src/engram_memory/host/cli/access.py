"""`engram-memory access check|example|grants|revoke`: what a person would get from the host's access rules,
before they sign in; and, after, which clients they let in (grants), each revocable.

Reads `access.toml` in the home exactly as sign-in does (host/access/); prints the deciding rule and the
binding their clients' tokens would carry, or why they are refused. A refusal is an answer, not a failure:
the command exits 0 either way and non-zero only when the rules cannot be read.
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from typing import Annotated, Any

import typer

from engram_memory.contract.instants import format_instant
from engram_memory.contract.tools import Tool
from engram_memory.engine.ports.sign_in import GrantRow, SignInStore
from engram_memory.host.access.ending import end_grant, turn_away
from engram_memory.host.access.rules import Decision, Identity
from engram_memory.host.access.rules_file import EXAMPLE_ACCESS_TOML, AccessRulesError, read_access_rules
from engram_memory.host.cli.common import (
    HomeOption,
    JsonOption,
    fail,
    opened_engine,
    opened_sign_in,
    say,
    token_revoker,
)
from engram_memory.host.compose import current_user
from engram_memory.host.language.catalogue import _, ngettext
from engram_memory.host.language.words import label
from engram_memory.host.oauth.clients import ClientRefused, client_name, host_registered_client
from engram_memory.host.settings import resolve_home


def register(app: typer.Typer) -> None:
    """Adds this module's commands to the main `engram-memory` app."""
    access_app = typer.Typer(
        rich_markup_mode=None,
        help="Who may sign in and what their agents get: the host's access rules (access.toml in the home).",
    )
    app.add_typer(access_app, name="access")
    access_app.command("check")(access_check)
    access_app.command("example")(access_example)
    access_app.command("grants")(access_grants)
    access_app.command("revoke")(access_revoke)
    access_app.command("add-client")(access_add_client)
    access_app.command("revoke-client")(access_revoke_client)


def decision_json(identity: Identity, decision: Decision) -> dict[str, Any]:
    access = decision.access
    answer: dict[str, Any] = {"principal": identity.principal, "rule": decision.rule, "refused": decision.refused}
    if access is not None:
        answer.update(
            tenant=access.tenant,
            workspaces=list(access.workspaces),
            grants=sorted(access.grants),
            purpose=access.purpose,
            confirm_mutations=access.confirm_mutations,
            trust_class=access.trust_class,
            access_lifetime_s=access.access_lifetime_s,
            refresh_lifetime_s=access.refresh_lifetime_s,
        )
    return answer


def access_check(
    email: Annotated[str | None, typer.Option("--email", help="The email the identity provider vouches for.")] = None,
    group: Annotated[
        list[str] | None, typer.Option("--groups", "--group", help="A group the person is in (repeatable).")
    ] = None,
    issuer: Annotated[
        str | None, typer.Option("--issuer", help="The identity provider's issuer URL (rules naming one need it).")
    ] = None,
    subject: Annotated[str | None, typer.Option("--subject", help="The person's subject (sub) at that issuer.")] = None,
    unverified: Annotated[
        bool, typer.Option("--unverified-email", help="The provider does not vouch for the email (no domain match).")
    ] = False,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show which rule decides for this person and what their clients' tokens would carry."""
    if email is None and subject is None:
        fail(_("give --email or --subject (and --groups, --issuer as the provider would send them)"))
    paths = resolve_home(home)
    try:
        rules = read_access_rules(paths.access)
    except AccessRulesError as exc:
        fail(str(exc))
    if rules is None:
        fail(
            _("no access rules: {access} does not exist (engram-memory access example prints a start)").format(
                access=paths.access
            )
        )
    identity = Identity(
        issuer=issuer or "",
        subject=subject or (email or ""),
        email=email,
        email_verified=email is not None and not unverified,
        groups=frozenset(group or ()),
    )
    decision = rules.decide(identity)
    if as_json:
        sys.stdout.write(json.dumps(decision_json(identity, decision)) + "\n")
        return
    access = decision.access
    if access is None:
        why = _("rule '{rule}' refuses them").format(rule=decision.rule) if decision.rule else _("no rule matches them")
        say(_("refused: {why}; {principal} could not sign in").format(why=why, principal=identity.principal))
        return
    tools = ", ".join(Tool(name).short_name for name in sorted(access.grants)) or _("no tools")
    workspaces = ", ".join(access.workspaces)
    say(_("allowed by rule '{rule}' as {principal}").format(rule=decision.rule, principal=identity.principal))
    say(
        _("    tenant {tenant}; workspaces {workspaces} (a client naming none gets {first})").format(
            tenant=access.tenant, workspaces=workspaces, first=access.workspaces[0]
        )
    )
    say(
        _("    tools {tools}; purpose {purpose}; trust {trust_class}").format(
            tools=tools, purpose=access.purpose, trust_class=access.trust_class
        )
    )
    say(
        _("    human approval of captures and admissions: required")
        if access.confirm_mutations
        else _("    human approval of captures and admissions: not required")
    )
    say(
        _("    access tokens live {access}; refresh for {refresh}").format(
            access=duration_words(access.access_lifetime_s), refresh=duration_words(access.refresh_lifetime_s)
        )
    )
    if not issuer:
        say(_("    (no --issuer given: rules that name an issuer were not matched)"))


def duration_words(seconds: int) -> str:
    """90 -> "90s", 600 -> "10m", 2592000 -> "30d": the largest unit that divides it, as access.toml writes it."""
    for unit, size in (("d", 86_400), ("h", 3600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def access_example() -> None:
    """Print a commented access.toml to start from."""
    sys.stdout.write(EXAMPLE_ACCESS_TOML)


def grant_json(grant: GrantRow, client: str, now_ms: int) -> dict[str, Any]:
    status = "revoked" if grant.revoked_at_ms is not None else "ended" if grant.expires_at_ms <= now_ms else "active"
    return {
        "grant_id": grant.grant_id,
        "status": status,
        "principal": grant.principal,
        "client_id": grant.client_id,
        "client": client,
        "workspace": grant.workspace,
        "tools": list(grant.scopes),
        "granted_at": format_instant(grant.created_at_ms),
        "ends_at": format_instant(grant.expires_at_ms),
        "revoked_at": None if grant.revoked_at_ms is None else format_instant(grant.revoked_at_ms),
        "revoked_because": grant.revoked_reason,
    }


def access_grants(
    email: Annotated[str | None, typer.Option("--email", help="Only this person's grants.")] = None,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """List the clients people let in when they signed in (their grants), oldest first."""
    paths = resolve_home(home)
    with opened_sign_in(paths) as store:
        grants = store.grants(principal=email.strip().lower() if email else None)
        names = {grant.client_id: _client_name(store, grant.client_id) for grant in grants}
    now_ms = int(time.time() * 1000)
    items = [grant_json(grant, names[grant.client_id], now_ms) for grant in grants]
    if as_json:
        sys.stdout.write(json.dumps(items) + "\n")
        return
    if not items:
        say(_("no grants (people grant clients access when they sign in: serve --http --public-url)"))
        return
    for item in items:
        say(f"{item['grant_id']}  {label(item['status'])}  {item['principal']}  {item['client']}  {item['workspace']}")


def access_revoke(
    grant_id: Annotated[str, typer.Argument(help="A grant id (engram-memory access grants).")],
    home: HomeOption = None,
) -> None:
    """Revoke a grant: the client's refresh tokens stop working and its live access tokens are revoked."""
    with opened_engine(home) as (engine, paths), opened_sign_in(paths) as store:
        grant = store.grant(grant_id)
        if grant is None:
            fail(_("no grant {grant_id} (engram-memory access grants lists them)").format(grant_id=grant_id))
        first = end_grant(store, token_revoker(engine), grant_id, f"revoked by {current_user()}", _now_ms())
    if first:
        say(_("{grant_id}: revoked; its client must sign in again").format(grant_id=grant_id))
    else:
        say(_("{grant_id}: was revoked already; its client must sign in again").format(grant_id=grant_id))


def access_revoke_client(
    client_id: Annotated[str, typer.Argument(help="A client id (engram-memory access grants shows them).")],
    home: HomeOption = None,
) -> None:
    """Turn a client away: nobody can sign in to it any more, and every grant it holds ends (refresh tokens
    and live access tokens). For a client that is lost, leaked or unwanted."""
    with opened_engine(home) as (engine, paths), opened_sign_in(paths) as store:
        if store.client(client_id) is None:
            fail(
                _("no client {client_id} (engram-memory access grants shows the clients people let in)").format(
                    client_id=client_id
                )
            )
        reason = f"its client was revoked by {current_user()}"
        first, ended = turn_away(store, token_revoker(engine), client_id, reason, _now_ms())
    said = (
        ngettext("{client_id}: revoked; {count} grant ended", "{client_id}: revoked; {count} grants ended", ended)
        if first
        else ngettext(
            "{client_id}: was revoked already; {count} grant ended",
            "{client_id}: was revoked already; {count} grants ended",
            ended,
        )
    )
    say(said.format(client_id=client_id, count=ended))


def _now_ms() -> int:
    return int(time.time() * 1000)


def access_add_client(
    name: Annotated[str, typer.Argument(help="What the consent page calls the client, e.g. 'Claude Code'.")],
    redirect_uri: Annotated[
        list[str], typer.Option("--redirect-uri", help="Where the client takes the code (repeatable).")
    ],
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Register a client for people to use, and print its client id: for a client that names itself by a
    metadata document this server cannot fetch (Claude Code on a server without internet access)."""
    now_ms = int(time.time() * 1000)
    client_id = str(uuid.uuid4())
    try:
        row = host_registered_client(
            name, redirect_uri, client_id=client_id, now_ms=now_ms, scopes=[tool.value for tool in Tool]
        )
    except ClientRefused as refused:
        fail(str(refused))
    with opened_sign_in(resolve_home(home)) as store:
        store.put_client(row)
    if as_json:
        say(json.dumps({"client_id": client_id, "client_name": name.strip(), "redirect_uris": redirect_uri}))
        return
    say(client_id)


def _client_name(store: SignInStore, client_id: str) -> str:
    row = store.client(client_id)
    return client_id if row is None else client_name(row.metadata, client_id)
