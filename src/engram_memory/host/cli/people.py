"""`engram-memory people`: accounts on this host for a team without an identity provider of its own.

The operator adds a person (email, groups) and hands over the one-time enrolment code printed once; the
person chooses their password with it. Groups feed the access rules (access.toml); disabling a person
revokes every grant they gave, so their clients' next refresh fails.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer

from engram_memory.contract.instants import format_instant
from engram_memory.engine.ports.sign_in import PersonRow, SignInStore
from engram_memory.host.access.people import (
    Enrolment,
    PeopleError,
    add_person,
    disable_person,
    enable_person,
    new_enrolment,
    set_groups,
)
from engram_memory.host.bindings import BindingError, parse_duration
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
from engram_memory.host.language.catalogue import _
from engram_memory.host.language.words import label
from engram_memory.host.settings import resolve_home

GroupOption = Annotated[list[str] | None, typer.Option("--group", help="A group the person is in (repeatable).")]
EnrolForOption = Annotated[str, typer.Option("--enrol-for", help="How long the enrolment code works: 90m, 48h, 7d.")]


def register(app: typer.Typer) -> None:
    """Adds this module's commands to the main `engram-memory` app."""
    people_app = typer.Typer(
        rich_markup_mode=None, help="Accounts on this host: add people, hand them an enrolment code, set groups."
    )
    app.add_typer(people_app, name="people")
    people_app.command("add")(people_add)
    people_app.command("list")(people_list)
    people_app.command("enrol")(people_enrol)
    people_app.command("groups")(people_groups)
    people_app.command("disable")(people_disable)
    people_app.command("enable")(people_enable)


@contextmanager
def _sign_in(home: Path | None) -> Iterator[SignInStore]:
    with opened_sign_in(resolve_home(home)) as store:
        try:
            yield store
        except PeopleError as exc:
            fail(str(exc))


def _now_ms() -> int:
    return int(time.time() * 1000)


def _status(person: PersonRow, now_ms: int) -> str:
    if person.disabled_at_ms is not None:
        return "disabled"
    if person.enrolment_digest is not None and (person.enrolment_expires_at_ms or 0) > now_ms:
        return "enrolling" if person.password_hash is None else "active, re-enrolling"
    return "active" if person.password_hash is not None else "enrolment expired"


def person_json(person: PersonRow, now_ms: int) -> dict[str, Any]:
    waiting = person.enrolment_digest is not None and person.enrolment_expires_at_ms is not None
    return {
        "email": person.email,
        "groups": list(person.groups),
        "status": _status(person, now_ms),
        "enrolment_expires_at": format_instant(person.enrolment_expires_at_ms)
        if waiting and person.enrolment_expires_at_ms
        else None,
        "created_at": format_instant(person.created_at_ms),
        "created_by": person.created_by,
    }


def _enrol_for(text: str) -> int:
    try:
        return parse_duration(text)
    except BindingError as exc:
        fail(_("--enrol-for: {exc}").format(exc=exc))


def _said(enrolment: Enrolment, as_json: bool) -> None:
    until = format_instant(enrolment.person.enrolment_expires_at_ms or 0)
    if as_json:
        sys.stdout.write(json.dumps({**person_json(enrolment.person, _now_ms()), "enrolment_code": enrolment.secret}))
        sys.stdout.write("\n")
        return
    say(_("enrolment code for {email}: {secret}").format(email=enrolment.person.email, secret=enrolment.secret))
    say(
        _(
            "    works once, until {until}: with it the person chooses their own password (hand it over privately)"
        ).format(until=until)
    )


def people_add(
    email: Annotated[str, typer.Argument(help="The person's email (how they sign in; what access rules match).")],
    group: GroupOption = None,
    enrol_for: EnrolForOption = "7d",
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Add a person and print their one-time enrolment code (shown once: hand it over privately)."""
    seconds = _enrol_for(enrol_for)
    with _sign_in(home) as store:
        enrolment = add_person(
            store, email, group or [], now_ms=_now_ms(), created_by=current_user(), enrol_for_s=seconds
        )
    _said(enrolment, as_json)


def people_enrol(
    email: Annotated[str, typer.Argument(help="The person's email.")],
    enrol_for: EnrolForOption = "7d",
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Print a new one-time enrolment code (a lost code, or a forgotten password); the old password works until
    the code is used."""
    seconds = _enrol_for(enrol_for)
    with _sign_in(home) as store:
        enrolment = new_enrolment(store, email, now_ms=_now_ms(), enrol_for_s=seconds)
    _said(enrolment, as_json)


def people_list(home: HomeOption = None, as_json: JsonOption = False) -> None:
    """List the accounts on this host: email, groups, status (never a password or a code)."""
    with _sign_in(home) as store:
        people = store.people()
    now_ms = _now_ms()
    items = [person_json(person, now_ms) for person in people]
    if as_json:
        sys.stdout.write(json.dumps(items) + "\n")
        return
    if not items:
        say(_("no accounts (engram-memory people add EMAIL --group G adds one)"))
        return
    for item in items:
        groups = ", ".join(item["groups"]) or _("no groups")
        say(f"{item['email']}  {label(item['status'])}  {groups}")


def people_groups(
    email: Annotated[str, typer.Argument(help="The person's email.")],
    group: GroupOption = None,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Set the groups a person is in (all of them: those not given are left); takes effect at their next sign-in
    or refresh."""
    with _sign_in(home) as store:
        person = set_groups(store, email, group or [])
    if as_json:
        sys.stdout.write(json.dumps(person_json(person, _now_ms())) + "\n")
    else:
        say(_("{email}: groups {groups}").format(email=person.email, groups=", ".join(person.groups) or _("none")))


def people_disable(email: Annotated[str, typer.Argument(help="The person's email.")], home: HomeOption = None) -> None:
    """Stop a person signing in, and end every grant they gave with its live access tokens (their clients lose
    access at once)."""
    with opened_engine(home) as (engine, _paths), _sign_in(home) as store:
        person = disable_person(store, email, now_ms=_now_ms(), revoke_token=token_revoker(engine))
    say(_("{email}: disabled; their clients have lost access").format(email=person.email))


def people_enable(email: Annotated[str, typer.Argument(help="The person's email.")], home: HomeOption = None) -> None:
    """Let a disabled person sign in again (the grants they gave stay revoked)."""
    with _sign_in(home) as store:
        person = enable_person(store, email)
    say(_("{email}: enabled").format(email=person.email))
