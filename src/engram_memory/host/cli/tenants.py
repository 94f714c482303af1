"""`engram-memory tenants`: which PostgreSQL cluster each tenant lives in, and moving one while its agents work."""

from __future__ import annotations

import json
import sys
from typing import Annotated

import typer

from engram_memory.host.cli.common import HomeOption, JsonOption, fail, say
from engram_memory.host.compose import HomeError
from engram_memory.host.language.catalogue import _
from engram_memory.host.settings import resolve_home
from engram_memory.host.tenant_routes import HOME_CLUSTER, home_routes

ToOption = Annotated[str, typer.Option("--to", help="The cluster of tenants.toml to move to ('home': the home's own).")]


def register(app: typer.Typer) -> None:
    """Adds this module's commands to the main `engram-memory` app."""
    group = typer.Typer(
        rich_markup_mode=None,
        help="Tenants across PostgreSQL clusters (tenants.toml): where each lives, and moving one.",
    )
    app.add_typer(group, name="tenants")
    group.command("list")(tenants_list)
    group.command("move")(tenants_move)


def tenants_list(home: HomeOption = None, as_json: JsonOption = False) -> None:
    """The clusters of tenants.toml and the tenants that live in each (any other lives at home)."""
    try:
        routes = home_routes(resolve_home(home))
    except HomeError as exc:
        fail(str(exc))
    listing = {name: sorted(t for t, where in routes.tenants.items() if where == name) for name in routes.names()}
    if as_json:
        sys.stdout.write(json.dumps({"clusters": listing}, indent=2) + "\n")
        return
    for name, tenants in listing.items():
        shown = ", ".join(tenants) if tenants else (_("every tenant not named") if name == HOME_CLUSTER else _("none"))
        say(f"{name}: {shown}")


def tenants_move(
    tenant: Annotated[str, typer.Argument(help="The tenant to move.")],
    to: ToOption,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Move a tenant to another cluster while its agents work: its writes wait (retriable) during one copy
    and one verify; then tenants.toml sends it there and the old copy is deleted and erased."""
    from engram_memory.host.tenant_move import MoveRefused, move_tenant

    try:
        moved = move_tenant(resolve_home(home), tenant, to)
    except (MoveRefused, HomeError) as exc:
        fail(str(exc))
    if as_json:
        answer = {
            "tenant": moved.tenant,
            "from": moved.source,
            "to": moved.target,
            "rows": moved.copied,
            "writes_held_s": round(moved.seconds_fenced, 3),
        }
        sys.stdout.write(json.dumps(answer, indent=2) + "\n")
        return
    rows = sum(moved.copied.values())
    say(
        _(
            "moved tenant '{tenant}' from {source} to {target}: {rows} rows copied and verified; its writes waited "
            "{seconds_fenced:.1f} s"
        ).format(
            tenant=moved.tenant,
            source=moved.source,
            target=moved.target,
            rows=rows,
            seconds_fenced=moved.seconds_fenced,
        )
    )
