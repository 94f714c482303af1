"""`engram-memory access check`: what a person would get from the host's access rules, before they sign in.

Reads `access.toml` in the home exactly as sign-in does (host/access/); prints the deciding rule and the
binding their clients' tokens would carry, or why they are refused. A refusal is an answer, not a failure:
the command exits 0 either way and non-zero only when the rules cannot be read.
"""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any

import typer

from engram_memory.contract.tools import Tool
from engram_memory.host.access.rules import Decision, Identity
from engram_memory.host.access.rules_file import EXAMPLE_ACCESS_TOML, AccessRulesError, read_access_rules
from engram_memory.host.cli.common import HomeOption, JsonOption, fail, say
from engram_memory.host.settings import resolve_home


def register(app: typer.Typer) -> None:
    """Adds this module's commands to the main `engram-memory` app."""
    access_app = typer.Typer(
        help="Who may sign in and what their agents get: the host's access rules (access.toml in the home)."
    )
    app.add_typer(access_app, name="access")
    access_app.command("check")(access_check)
    access_app.command("example")(access_example)


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
        fail("give --email or --subject (and --groups, --issuer as the provider would send them)")
    paths = resolve_home(home)
    try:
        rules = read_access_rules(paths.access)
    except AccessRulesError as exc:
        fail(str(exc))
    if rules is None:
        fail(f"no access rules: {paths.access} does not exist (engram-memory access example prints a start)")
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
        why = f"rule '{decision.rule}' refuses them" if decision.rule else "no rule matches them"
        say(f"refused: {why}; {identity.principal} could not sign in")
        return
    tools = ", ".join(Tool(name).short_name for name in sorted(access.grants)) or "no tools"
    workspaces = ", ".join(access.workspaces)
    say(f"allowed by rule '{decision.rule}' as {identity.principal}")
    say(f"    tenant {access.tenant}; workspaces {workspaces} (a client naming none gets {access.workspaces[0]})")
    say(f"    tools {tools}; purpose {access.purpose}; trust {access.trust_class}")
    say(f"    human approval of captures and admissions: {'required' if access.confirm_mutations else 'not required'}")
    lifetimes = f"{duration_words(access.access_lifetime_s)}; refresh for {duration_words(access.refresh_lifetime_s)}"
    say(f"    access tokens live {lifetimes}")
    if not issuer:
        say("    (no --issuer given: rules that name an issuer were not matched)")


def duration_words(seconds: int) -> str:
    """90 -> "90s", 600 -> "10m", 2592000 -> "30d": the largest unit that divides it, as access.toml writes it."""
    for unit, size in (("d", 86_400), ("h", 3600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def access_example() -> None:
    """Print a commented access.toml to start from."""
    sys.stdout.write(EXAMPLE_ACCESS_TOML)
