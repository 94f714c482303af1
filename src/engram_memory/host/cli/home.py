"""Host commands `init`, `bind` and `demo`: making a home, signing an agent's binding, the scripted demo."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import anyio
import typer

from engram_memory.contract.binding import Binding
from engram_memory.contract.errors import ContractError
from engram_memory.contract.instants import format_instant
from engram_memory.contract.tools import ALL_TOOLS, tool_from_name
from engram_memory.host.binding_file import BindingFileError, write_token_file
from engram_memory.host.bindings import BindingError, IssuedBinding, issue_binding, issued_row_of, parse_duration
from engram_memory.host.cli.common import HomeOption, JsonOption, err, fail, opened_engine, out, warn
from engram_memory.host.client_config import check_request, client_config
from engram_memory.host.compose import (
    HomeError,
    current_user,
    init_home,
)
from engram_memory.host.keys.files import KeyFileError, load_signing_key
from engram_memory.host.language.catalogue import _
from engram_memory.host.language.formats import when
from engram_memory.host.settings import HostPaths, resolve_home


def register(app: typer.Typer) -> None:
    """Adds this module's commands to the main `engram-memory` app."""
    app.command("init")(init)
    app.command("bind")(bind)
    app.command("demo")(demo)


def init(
    store: Annotated[
        str | None,
        typer.Option(
            "--store", help="'sqlite' (default, embedded) or postgresql://OWNER@HOST/DB (no password in the URL)."
        ),
    ] = None,
    app_role: Annotated[
        str | None,
        typer.Option("--app-role", help="PostgreSQL: the role agent calls run as, behind row-level security."),
    ] = None,
    vault: Annotated[
        str | None,
        typer.Option("--vault", help="PostgreSQL: postgresql://OWNER@HOST/KEYS_DB for data keys (else keys/vault.db)."),
    ] = None,
    read_url: Annotated[
        list[str] | None,
        typer.Option(
            "--read-url",
            help="PostgreSQL: a hot standby (postgresql://OWNER@STANDBY/DB) that answers searches and gets"
            " (repeatable; replaces the home's list).",
        ),
    ] = None,
    direct_url: Annotated[
        str | None,
        typer.Option(
            "--direct-url",
            help="PostgreSQL: the primary past a connection pooler, for migrations and erasure's VACUUM FULL.",
        ),
    ] = None,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Create the store, key material, host signing key and default policy (idempotent)."""
    paths = resolve_home(home)
    try:
        report = init_home(paths, store, app_role=app_role, vault=vault, read_urls=read_url, direct_url=direct_url)
    except (HomeError, KeyFileError, ContractError, OSError) as exc:
        if isinstance(exc, ContractError):
            fail(_("the store could not be created ({code})").format(code=exc.code.value))
        fail(str(exc))
    if paths.recovery_file in report.created:
        # Said once, when the key is made: it is what survives losing this machine.
        err.print(
            _(
                "engram-memory: made this home's recovery key (keys/recovery.key). Run 'engram-memory "
                "recovery-key export' and keep it offline: with it and a backup archive, this home restores on "
                "another machine."
            ),
            markup=False,
            highlight=False,
        )
    if as_json:
        shown: dict[str, Any] = {"home": str(paths.home), "store": report.store}
        if report.app_role is not None or report.vault is not None:
            shown.update(app_role=report.app_role, vault=report.vault)
        shown["created"] = [str(p) for p in report.created]
        out.print_json(json.dumps(shown))
        return
    out.print(_("home: {home}").format(home=paths.home), markup=False)
    out.print(_("store: {store}").format(store=report.store), markup=False)
    if report.app_role is not None:
        out.print(_("runtime role: {app_role}").format(app_role=report.app_role), markup=False)
    if report.vault is not None:
        out.print(_("key vault: {vault}").format(vault=report.vault), markup=False)
    for path in report.created:
        out.print(_("created {path}").format(path=path), markup=False)
    if not report.created:
        out.print(_("nothing to do: the home is complete (keys are never overwritten)"))


def bind(
    tenant: Annotated[
        str,
        typer.Option(
            "--tenant",
            help="The organisation whose memories these are: nothing crosses from one tenant to another (e.g. acme).",
        ),
    ],
    workspace: Annotated[
        str,
        typer.Option(
            "--workspace",
            help="The shared memory within the tenant the agent reads and writes: a team or project (e.g. platform).",
        ),
    ],
    principal: Annotated[
        str,
        typer.Option(
            "--principal",
            help="The person or service the agent acts for, recorded on everything it writes (e.g. alice@acme.com).",
        ),
    ],
    agent: Annotated[
        str,
        typer.Option(
            "--agent", help="Which agent program holds the token, as the audit log names it (e.g. claude-code)."
        ),
    ],
    session: Annotated[
        str,
        typer.Option(
            "--session",
            help="A label for this run or conversation, kept with each call and capture (e.g. laptop or 2026-q1).",
        ),
    ],
    purpose: Annotated[
        str,
        typer.Option(
            "--purpose",
            help="Why the agent reads and writes (a ref such as purpose:support); every call must pass this "
            "purpose_ref, and the audit log keeps it.",
        ),
    ],
    grant: Annotated[list[str] | None, typer.Option("--grant", help="A tool to grant (repeatable).")] = None,
    all_tools: Annotated[bool, typer.Option("--all-tools", help="Grant all six tools.")] = False,
    confirm_mutations: Annotated[
        bool, typer.Option("--confirm-mutations", help="Capture and admission also need a human's approval.")
    ] = False,
    expires_in: Annotated[str, typer.Option("--expires-in", help="Lifetime: 90s, 30m, 8h, 7d.")] = "7d",
    trust_class: Annotated[
        str, typer.Option("--trust-class", help="asserted (default), earned or signed: what the host vouches for.")
    ] = "asserted",
    print_config: Annotated[
        str | None,
        typer.Option(
            "--print-config",
            help="Print a ready MCP client configuration instead of the bare token: claude-desktop, claude-code, "
            "vscode or cursor.",
            metavar="CLIENT",
        ),
    ] = None,
    http_url: Annotated[
        str | None,
        typer.Option(
            "--http", help="With --print-config: connect to this `serve --http` URL (…/mcp) instead of stdio."
        ),
    ] = None,
    to_file: Annotated[
        Path | None,
        typer.Option(
            "--to-file",
            help="Write the token to this file (mode 0600) for serve --binding-file, instead of printing it;"
            " engram-memory bindings renew FILE keeps it current.",
        ),
    ] = None,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Print one signed binding token on stdout (or, with --print-config, a client configuration using it).

    A binding fixes what one agent may reach and in whose name: one workspace of one tenant, for one
    principal, as one agent in one session, for one purpose, with the tools granted. The agent cannot
    change any of it; the host checks it on every call."""
    paths = resolve_home(home)
    refusal = check_request(print_config, http_url, as_json)
    if refusal is None and to_file is not None and print_config is not None:
        refusal = _("--to-file and --print-config both say where the token goes: choose one")
    if refusal is not None:
        fail(refusal)
    grants: set[str] = set()
    for name in grant or []:
        tool = tool_from_name(name)
        if tool is None:
            fail(_("unknown tool '{name}'").format(name=name))
        grants.add(tool.value)
    if all_tools:
        grants.update(tool.value for tool in ALL_TOOLS)
    try:
        issued = issue_binding(
            load_signing_key(paths),
            tenant=tenant,
            workspace=workspace,
            principal=principal,
            agent_id=agent,
            session=session,
            purpose_ref=purpose,
            grants=frozenset(grants),
            confirm_mutations=confirm_mutations,
            lifetime_s=parse_duration(expires_in),
            now_s=int(time.time()),
            trust_class=trust_class,
        )
    except (BindingError, KeyFileError) as exc:
        fail(str(exc))
    b = issued.binding
    # Kept before the token is shown: `bindings list` and `revoke` know every binding a person holds.
    with opened_engine(home) as (engine, _paths):
        try:
            engine.record_binding(issued_row_of(b, issued_by=current_user()))
        except ContractError as exc:
            fail(_("the binding could not be recorded: the store is unavailable ({code})").format(code=exc.code.value))
    if not grants:
        warn(_("the binding grants no tool: the agent will see no memory tools (add --grant TOOL or --all-tools)"))
    _deliver(issued, paths, print_config=print_config, http_url=http_url, to_file=to_file, as_json=as_json)


def _deliver(
    issued: IssuedBinding,
    paths: HostPaths,
    *,
    print_config: str | None,
    http_url: str | None,
    to_file: Path | None,
    as_json: bool,
) -> None:
    """The token where the person asked for it: a file, a client configuration, JSON or stdout."""
    b = issued.binding
    if to_file is not None:
        try:
            write_token_file(to_file.expanduser(), issued.token)
        except BindingFileError as exc:
            fail(
                _("{reason} (binding {token_id} was issued: revoke it, or write the file and run bind again)").format(
                    reason=exc, token_id=b.token_id
                )
            )
    if print_config is not None:
        sys.stdout.write(client_config(print_config, issued.token, paths.home, http_url=http_url) + "\n")
        _say_token_id(b, _("; the snippet holds the token: keep it out of version control"))
    elif as_json:
        payload = {
            **({"file": str(to_file)} if to_file is not None else {"token": issued.token}),
            "token_id": b.token_id,
            "tenant": b.tenant,
            "workspace": b.workspace,
            "principal": b.principal,
            "agent_id": b.agent_id,
            "session": b.session,
            "purpose_ref": b.purpose_ref,
            "grants": sorted(b.grants),
            "confirm_mutations": b.confirm_mutations,
            "trust_class": b.trust_class,
            "expires_at": format_instant(b.expires_at_ms),
        }
        sys.stdout.write(json.dumps(payload) + "\n")
    elif to_file is not None:
        _say_token_id(
            b, _("; written to {file} (serve --binding-file reads it, bindings renew renews it)").format(file=to_file)
        )
    else:
        sys.stdout.write(issued.token + "\n")
        _say_token_id(b, "")


def _say_token_id(binding: Binding, tail: str) -> None:
    err.print(
        _(
            "engram-memory: token id {token_id} (revoke with: engram-memory revoke {token_id}), expires {expires}{tail}"
        ).format(token_id=binding.token_id, expires=when(binding.expires_at_ms), tail=tail),
        markup=False,
        highlight=False,
    )


def demo() -> None:
    """A scripted agent session against a fresh temporary store, over a real MCP stdio connection."""
    from engram_memory.host.demo import run_demo

    try:
        code = anyio.run(run_demo, out)
    except* RuntimeError as group:
        first: BaseException = group
        while isinstance(first, BaseExceptionGroup):
            first = first.exceptions[0]
        fail(_("the demo stopped: {first}").format(first=first))
    raise typer.Exit(code=code)
