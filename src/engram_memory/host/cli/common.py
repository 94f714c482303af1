"""What every `engram-memory` command shares: the consoles, the --home and --json options, failing in one line.

Every failure exits non-zero with a one-line reason on stderr; `opened_engine` maps the host's
own faults (no home, bad key file, unavailable store) to such a line.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, NoReturn

import typer
from rich.console import Console

from engram_memory.contract.errors import ContractError
from engram_memory.contract.instants import parse_instant
from engram_memory.engine.engine import Engine
from engram_memory.engine.ports.sign_in import SignInStore
from engram_memory.host.access.ending import revoking_as
from engram_memory.host.compose import HomeError, current_user, open_engine, open_vault
from engram_memory.host.keys.files import KeyFileError
from engram_memory.host.language.catalogue import N_, _, ngettext
from engram_memory.host.settings import HOME_ENV, HostPaths, resolve_home
from engram_memory.host.terminal import SafeConsole, inline

out: Console = SafeConsole(soft_wrap=True)
err: Console = SafeConsole(stderr=True, soft_wrap=True)

# `--home` given before the subcommand (`engram-memory --home DIR records list`), kept for the subcommand.
GLOBAL_HOME = "engram_memory.home"


def _home_or_global(ctx: typer.Context, param: typer.CallbackParam, value: Path | None) -> Path | None:
    """The subcommand's own `--home` wins, then the one before the subcommand, then ENGRAM_HOME."""
    # By name: typer carries its own copy of click, whose enum is not importable by a public path.
    source = ctx.get_parameter_source(param.name) if param.name else None
    if source is not None and source.name == "COMMANDLINE":
        return value
    given: Path | None = ctx.meta.get(GLOBAL_HOME)
    return given if given is not None else value


HomeOption = Annotated[
    Path | None,
    typer.Option(
        "--home",
        envvar=HOME_ENV,
        help="The host's home folder (store, keys, policy); also accepted before the subcommand.",
        show_envvar=True,
        callback=_home_or_global,
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]


def one_line(reason: str) -> str:
    """Control characters and line breaks would split a one-line reason; fold them into spaces."""
    return " ".join("".join(ch if ch.isprintable() else " " for ch in reason).split())


def fail(reason: str, code: int = 1) -> NoReturn:
    err.print(_("engram-memory: error: {reason}").format(reason=one_line(reason)), markup=False, highlight=False)
    raise typer.Exit(code=code)


def note_cut_off(shown: int, what: str) -> None:
    """A list that stopped at its --limit says so, on stderr: stdout stays exactly the list (or its JSON)."""
    err.print(
        _("engram-memory: showing the first {shown} {what}; more exist (raise --limit to see them)").format(
            shown=shown, what=what
        ),
        markup=False,
        highlight=False,
    )


def warn(text: str) -> None:
    """A warning for the person at the command, on stderr (the command still succeeds)."""
    err.print(_("engram-memory: warning: {text}").format(text=one_line(text)), markup=False, highlight=False)


def say(text: str) -> None:
    """One line for a person, printed exactly (no markup, no highlighting); a line break or control
    character inside it (from a value an agent chose) is shown as an escape."""
    out.print(inline(text), markup=False, highlight=False)


OptionalTenant = Annotated[
    str | None,
    typer.Option(
        "--tenant", help="The tenant; may be left out when the home holds one workspace (or one of its name)."
    ),
]
OptionalWorkspace = Annotated[
    str | None,
    typer.Option("--workspace", help="The workspace; may be left out when the home holds only one that matches."),
]


def only_scope(engine: Engine, tenant: str | None, workspace: str | None) -> tuple[str, str]:
    """The scope a command means: as named, or, where a part is left out, the one scope of the store that
    matches what was given; fails naming the choices when there are none or several."""
    if tenant is not None and workspace is not None:
        return tenant, workspace
    known = sorted(engine.state_tallies().events, key=lambda scope: (scope.tenant, scope.workspace))
    matching = [
        scope
        for scope in known
        if (tenant is None or scope.tenant == tenant) and (workspace is None or scope.workspace == workspace)
    ]
    if len(matching) == 1:
        return matching[0].tenant, matching[0].workspace
    if not matching:
        fail(_("no workspace of this home matches: name one with --tenant and --workspace"))
    names = ", ".join(f"{scope.tenant}/{scope.workspace}" for scope in matching[:10])
    fail(
        ngettext(
            "{count} workspace matches ({names}): name one with --tenant and --workspace",
            "{count} workspaces match ({names}): name one with --tenant and --workspace",
            len(matching),
        ).format(count=len(matching), names=names + (", …" if len(matching) > 10 else ""))
    )


@contextmanager
def opened_engine(home: Path | None) -> Iterator[tuple[Engine, HostPaths]]:
    paths = resolve_home(home)
    try:
        with open_engine(paths) as engine:
            yield engine, paths
    except (HomeError, KeyFileError) as exc:
        fail(str(exc))
    except ContractError as exc:
        fail(_("the store is unavailable ({code})").format(code=exc.code.value))


def token_revoker(engine: Engine) -> Callable[[str], object]:
    """Revokes a binding by its token id in the name of the person running the command."""
    return revoking_as(engine, current_user())


@contextmanager
def opened_sign_in(paths: HostPaths) -> Iterator[SignInStore]:
    """The vault's sign-in tables (people, clients, grants), closed when the block ends; a vault that cannot
    be opened, or fails meanwhile, is a one-line failure."""
    try:
        vault = open_vault(paths)
    except HomeError as exc:
        fail(str(exc))
    except ContractError as exc:
        fail(_("the vault is unavailable ({code})").format(code=exc.code.value))
    try:
        yield vault.sign_in()
    except ContractError as exc:
        fail(_("the vault is unavailable ({code})").format(code=exc.code.value))
    finally:
        vault.close()


_DAY = re.compile(r"^\d{4}-\d{2}-\d{2}$")
INSTANT_FORMS = N_("a date (2026-01-31, midnight UTC) or an ISO instant (2026-01-31T09:00Z, 2026-01-31T10:00:00+01:00)")


def host_instant(option: str, text: str | None) -> int | None:
    """Milliseconds since the epoch of a date or an ISO 8601 instant a person typed; a time without a zone
    is UTC. Anything else fails in one line naming the option and the forms it takes."""
    if text is None:
        return None
    canonical = parse_instant(text)
    if canonical is not None:
        return canonical
    value = text.strip()
    try:
        if _DAY.match(value):
            moment = datetime.strptime(value, "%Y-%m-%d").replace(tzinfo=UTC)
        else:
            moment = datetime.fromisoformat(value)
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=UTC)
    except ValueError:
        fail(_("{option} must be {instant_forms}").format(option=option, instant_forms=_(INSTANT_FORMS)))
    return int(moment.timestamp() * 1000)
