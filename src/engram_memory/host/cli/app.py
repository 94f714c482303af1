"""The `engram-memory` command: the host's interface. No agent ever reaches it.

Every subcommand takes `--home DIR` (or `ENGRAM_HOME`); listings take `--json`; every failure exits
non-zero with a one-line reason on stderr.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import anyio
import typer

from engram_memory.contract.errors import ContractError
from engram_memory.contract.instants import format_instant
from engram_memory.contract.tools import ALL_TOOLS, tool_from_name
from engram_memory.engine.lifecycle.gate import APPROVAL_TTL_MAX_MS, ConfirmationError
from engram_memory.engine.ports.store import ConfirmationRow
from engram_memory.host.bindings import BindingError, issue_binding, parse_duration
from engram_memory.host.cli import keys as cli_keys
from engram_memory.host.cli import operations as cli_operations
from engram_memory.host.cli import records as cli_records
from engram_memory.host.cli import reindex as cli_index
from engram_memory.host.cli import review as cli_review
from engram_memory.host.cli.common import HomeOption, JsonOption, err, fail, one_line, out, say
from engram_memory.host.compose import (
    HomeError,
    current_user,
    init_home,
    open_engine,
    serving_engines,
    verify_token,
)
from engram_memory.host.keys.files import KeyFileError, load_signing_key
from engram_memory.host.serve.http_guard import BODY_TIMEOUT_S, HEADER_TIMEOUT_S, MAX_CONNECTIONS, GuardSettings
from engram_memory.host.settings import HOUSEKEEPING_INTERVAL_S, binding_from_environment, resolve_home
from engram_memory.host.terminal import json_text

app = typer.Typer(
    name="engram-memory",
    help="Governed long-term memory for AI agents over MCP: the host's command line.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
confirmations_app = typer.Typer(help="The human gate for withdraw and forget (and gated capture/admission).")
app.add_typer(confirmations_app, name="confirmations")
for module in (cli_review, cli_records, cli_operations, cli_keys, cli_index):
    module.register(app)


@app.command()
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
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Create the store, key material, host signing key and default policy (idempotent)."""
    paths = resolve_home(home)
    try:
        report = init_home(paths, store, app_role=app_role, vault=vault)
    except (HomeError, KeyFileError, ContractError, OSError) as exc:
        fail(str(exc) if not isinstance(exc, ContractError) else f"the store could not be created ({exc.code.value})")
    if as_json:
        shown: dict[str, Any] = {"home": str(paths.home), "store": report.store}
        if report.app_role is not None or report.vault is not None:
            shown.update(app_role=report.app_role, vault=report.vault)
        shown["created"] = [str(p) for p in report.created]
        out.print_json(json.dumps(shown))
        return
    out.print(f"home: {paths.home}", markup=False)
    out.print(f"store: {report.store}", markup=False)
    if report.app_role is not None:
        out.print(f"runtime role: {report.app_role}", markup=False)
    if report.vault is not None:
        out.print(f"key vault: {report.vault}", markup=False)
    for path in report.created:
        out.print(f"created {path}", markup=False)
    if not report.created:
        out.print("nothing to do: the home is complete (keys are never overwritten)")


@app.command()
def bind(
    tenant: Annotated[str, typer.Option("--tenant")],
    workspace: Annotated[str, typer.Option("--workspace")],
    principal: Annotated[str, typer.Option("--principal")],
    agent: Annotated[str, typer.Option("--agent")],
    session: Annotated[str, typer.Option("--session")],
    purpose: Annotated[str, typer.Option("--purpose", help="The purpose_ref the agent must pass.")],
    grant: Annotated[list[str] | None, typer.Option("--grant", help="A tool to grant (repeatable).")] = None,
    all_tools: Annotated[bool, typer.Option("--all-tools", help="Grant all six tools.")] = False,
    confirm_mutations: Annotated[
        bool, typer.Option("--confirm-mutations", help="Capture and admission also need a human's approval.")
    ] = False,
    expires_in: Annotated[str, typer.Option("--expires-in", help="Lifetime: 90s, 30m, 8h, 7d.")] = "7d",
    trust_class: Annotated[
        str, typer.Option("--trust-class", help="asserted (default), earned or signed: what the host vouches for.")
    ] = "asserted",
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Print one signed binding token on stdout."""
    paths = resolve_home(home)
    grants: set[str] = set()
    for name in grant or []:
        tool = tool_from_name(name)
        if tool is None:
            fail(f"unknown tool '{name}'")
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
    if as_json:
        b = issued.binding
        payload = {
            "token": issued.token,
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
    else:
        sys.stdout.write(issued.token + "\n")


@app.command()
def serve(
    binding: Annotated[str | None, typer.Option("--binding", help="The binding token (else ENGRAM_BINDING).")] = None,
    http: Annotated[
        bool, typer.Option("--http", help="Serve streamable HTTP: each request's bearer token is its binding.")
    ] = False,
    host: Annotated[str, typer.Option("--host", help="With --http: the address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="With --http: the port (0 picks one).")] = 8765,
    allow_remote: Annotated[
        bool, typer.Option("--allow-remote", help="With --http: allow a non-loopback address (TLS in front!).")
    ] = False,
    housekeeping_every: Annotated[
        float, typer.Option("--housekeeping-every", min=1.0, help="Seconds between expiry and key sweeps.")
    ] = HOUSEKEEPING_INTERVAL_S,
    header_timeout: Annotated[
        float,
        typer.Option(
            "--header-timeout", min=0.1, help="With --http: seconds a connection has to send a request's headers."
        ),
    ] = HEADER_TIMEOUT_S,
    body_timeout: Annotated[
        float,
        typer.Option(
            "--body-timeout", min=0.1, help="With --http: seconds from a request's headers to its body's end."
        ),
    ] = BODY_TIMEOUT_S,
    max_connections: Annotated[
        int, typer.Option("--max-connections", min=1, help="With --http: open connections at most.")
    ] = MAX_CONNECTIONS,
    home: HomeOption = None,
) -> None:
    """Serve MCP over stdio (one binding), or over streamable HTTP with --http (a binding per request)."""
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="engram-memory: %(levelname)s %(message)s")
    log = logging.getLogger("engram_memory.serve")
    paths = resolve_home(home)
    from engram_memory.host.serve.http import ListenError, refuse_unsafe_address, serve_http
    from engram_memory.host.serve.stdio import serve_with_housekeeping
    from engram_memory.mcp.server import build_server

    if http and binding:
        fail("--binding is for stdio: over HTTP every request carries its own bearer token")
    try:
        if http:
            refuse_unsafe_address(host, allow_remote)
        with serving_engines(paths) as (agents, owner):
            # Indexes built by another tokenizer or model are moved first: a stale scope cannot be searched.
            cli_index.serve_reindex(owner, log.info)
            # A store that fails its start-up check is refused rather than allowed to answer wrongly.
            first = owner.verify(full=False).first
            if first is not None:
                fail(f"{first.line}; run engram-memory verify")
            if http:
                public_key = load_signing_key(paths).public_key()
                guard = GuardSettings(header_timeout, body_timeout, max_connections)
                serve_http(
                    agents,
                    owner,
                    public_key,
                    host=host,
                    port=port,
                    housekeeping_every_s=housekeeping_every,
                    settings=guard,
                )
                return
            verified, reason = verify_token(paths, binding_from_environment(binding))
            if reason is not None:
                log.warning(reason)
            else:
                log.info("serving over stdio; binding %s verified", verified.token_id if verified else "-")
            anyio.run(serve_with_housekeeping, build_server(agents, lambda _ctx: verified), owner, housekeeping_every)
    except ListenError as exc:
        fail(str(exc))
    except (HomeError, KeyFileError) as exc:
        fail(str(exc))
    except ContractError as exc:
        fail(f"the store is unavailable ({exc.code.value})")


def _confirmation_json(row: ConfirmationRow, status: str) -> dict[str, Any]:
    return {
        "id": row.confirmation_id,
        "status": status,
        "tool": row.tool,
        "target": row.target,
        "tenant": row.scope.tenant,
        "workspace": row.scope.workspace,
        "principal": row.actor.principal,
        "agent_id": row.actor.agent_id,
        "session": row.actor.session,
        "reason_ref": row.reason_ref,
        "summary": dict(row.summary),
        "operation_digest": row.operation_digest,
        "requested_at": format_instant(row.requested_at_ms),
        "decided_at": None if row.decided_at_ms is None else format_instant(row.decided_at_ms),
        "decided_by": row.decided_by,
        "approval_expires_at": None
        if row.approval_expires_at_ms is None
        else format_instant(row.approval_expires_at_ms),
    }


@confirmations_app.command("list")
def confirmations_list(
    include_all: Annotated[bool, typer.Option("--all", help="Include decided, consumed and expired ones.")] = False,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """List confirmation requests waiting for a human (or all of them)."""
    try:
        with open_engine(resolve_home(home)) as engine:
            rows = engine.confirmations(include_decided=include_all)
    except (HomeError, KeyFileError) as exc:
        fail(str(exc))
    except ContractError:
        fail("the store is unavailable")
    items = [_confirmation_json(row, status) for row, status in rows]
    if as_json:
        sys.stdout.write(json.dumps(items) + "\n")
        return
    if not items:
        out.print("no confirmation requests")
        return
    for item in items:
        # One block per request: readable at any terminal width, and the id is never cut short. Every
        # value an agent chose is shown inline-escaped (say), so none can forge or hide a line.
        say(f"{item['id']}  {item['status']}  {item['tool']} {item['target']}")
        say(
            f"    asked by {item['principal']} ({item['tenant']}/{item['workspace']}), agent {item['agent_id']},"
            f" session {item['session']}"
        )
        details = f"    reason {item['reason_ref'] or '-'}; requested {item['requested_at']}"
        if item["approval_expires_at"]:
            details += f"; approved until {item['approval_expires_at']}"
        say(details)
        say(f"    {json_text(item['summary'])}")


def _decide(confirmation_id: str, home: Path | None, approve_ttl_s: int | None, as_json: bool) -> None:
    try:
        with open_engine(resolve_home(home)) as engine:
            if approve_ttl_s is None:
                row = engine.deny_confirmation(confirmation_id, decided_by=current_user())
            else:
                row = engine.approve_confirmation(
                    confirmation_id, decided_by=current_user(), ttl_ms=approve_ttl_s * 1000
                )
    except (HomeError, KeyFileError, ConfirmationError) as exc:
        fail(str(exc))
    except ContractError:
        fail("the store is unavailable")
    if as_json:
        sys.stdout.write(json.dumps(_confirmation_json(row, row.status)) + "\n")
    elif row.status == "approved" and row.approval_expires_at_ms is not None:
        say(
            f"approved {row.confirmation_id} ({row.tool} {row.target}) until "
            f"{format_instant(row.approval_expires_at_ms)}: the agent may now repeat the identical call"
        )
    else:
        say(f"denied {row.confirmation_id} ({row.tool} {row.target})")


@confirmations_app.command("approve")
def confirmations_approve(
    confirmation_id: Annotated[str, typer.Argument(metavar="ID")],
    ttl: Annotated[int, typer.Option("--ttl", help="Seconds the approval stays valid (1-300).")] = 300,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Approve one request: the agent's identical retry then executes, once."""
    if not 1 <= ttl <= APPROVAL_TTL_MAX_MS // 1000:
        fail("--ttl must be between 1 and 300 seconds")
    _decide(confirmation_id, home, ttl, as_json)


@confirmations_app.command("deny")
def confirmations_deny(
    confirmation_id: Annotated[str, typer.Argument(metavar="ID")],
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Deny one request: the operation is not asked again (the agent would need a new key)."""
    _decide(confirmation_id, home, None, as_json)


@app.command()
def demo() -> None:
    """A scripted agent session against a fresh temporary store, over a real MCP stdio connection."""
    from engram_memory.host.demo import run_demo

    try:
        code = anyio.run(run_demo, out)
    except* RuntimeError as group:
        first: BaseException = group
        while isinstance(first, BaseExceptionGroup):
            first = first.exceptions[0]
        fail(f"the demo stopped: {first}")
    raise typer.Exit(code=code)


def main() -> None:
    """Runs the CLI; usage errors get the same one-line reason as every other failure."""
    arguments = sys.argv[1:] or ["--help"]
    try:
        code = app(arguments, standalone_mode=False)
    except typer.Abort:
        err.print("engram-memory: error: aborted", markup=False, highlight=False)
        sys.exit(130)
    except typer.TyperException as exc:  # usage errors: unknown command, missing or bad option
        message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
        err.print(f"engram-memory: error: {one_line(message)}", markup=False, highlight=False)
        sys.exit(getattr(exc, "exit_code", 2))
    sys.exit(code if isinstance(code, int) else 0)
