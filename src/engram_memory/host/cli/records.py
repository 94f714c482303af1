"""Host commands for lifecycle maintenance: `records list|show|search`, one command per declared host
operation (engine/lifecycle/host_operations.py: dispute ... tombstone) and `records expire-due`."""

from __future__ import annotations

import inspect
import json
import sys
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from types import MappingProxyType
from typing import Annotated, Any

import typer
from rich.table import Table

from engram_memory.contract.errors import ContractError, ErrorCode
from engram_memory.contract.instants import format_instant
from engram_memory.contract.states import RecordState
from engram_memory.engine.engine import Engine
from engram_memory.engine.lifecycle import host_operations
from engram_memory.engine.lifecycle.host_operations import Argument, HostOperation
from engram_memory.engine.lifecycle.host_transitions import MaintenanceOutcome, MaintenanceRefused, Transition
from engram_memory.engine.ports.maintenance import RecordFilter
from engram_memory.host.cli.common import HomeOption, JsonOption, fail, note_cut_off, opened_engine, out, say
from engram_memory.host.cli.record_json import FIELDS, record_json
from engram_memory.host.cli.record_json import instant as _instant
from engram_memory.host.cli.records_as_of import AsOf, list_valid_at
from engram_memory.host.cli.records_search import search_command
from engram_memory.host.compose import current_user
from engram_memory.host.language.catalogue import N_, _, ngettext
from engram_memory.host.language.words import refusal as refusal_words
from engram_memory.host.reads import HostReadRefused, previews, read_record
from engram_memory.host.record_history import history_entry
from engram_memory.host.terminal import inline

IdArgument = Annotated[str, typer.Argument(metavar="ID", help="The record id (mem_...).")]
ReasonOption = Annotated[
    str | None, typer.Option("--reason", metavar="REF", help="An opaque reason ref kept in the journal.")
]
_YesOption = Annotated[bool, typer.Option("--yes", help="Confirm: this cannot be undone.")]

_PAST_TENSE = MappingProxyType(
    {
        "dispute": N_("disputed"),
        "resolve_dispute": N_("resolved"),
        "supersede": N_("superseded"),
        "mark_non_current": N_("marked non-current"),
        "rewind": N_("rewound"),
        "expire": N_("expired"),
        "trust_invalidate": N_("trust-invalidated"),
        "tombstone": N_("tombstoned"),
    }
)
_STORE_FAULTS = MappingProxyType(
    {
        ErrorCode.BLOB_MISSING: N_("the record's body or data key is missing; nothing was changed"),
        ErrorCode.MUTATION_OUTCOME_UNKNOWN: N_("the commit may not have happened; check with 'records show'"),
    }
)
_UNAVAILABLE = N_("the store is unavailable; nothing was changed")
# The CLI's table has less room than the console's page.
LIST_PREVIEW_CHARS = 60


def register(app: typer.Typer) -> None:
    """Adds this module's commands to the main `engram-memory` app."""
    group = typer.Typer(
        rich_markup_mode=None,
        help="Host lifecycle maintenance of accepted records: list, show, dispute, supersede, expire, tombstone.",
        no_args_is_help=True,
    )
    app.add_typer(group, name="records")
    for operation in host_operations.HOST_OPERATIONS.values():
        group.command(operation.command)(operation_command(operation))
    group.command("expire-due")(expire_due_command)
    group.command("list")(list_command)
    group.command("show")(show_command)
    group.command("search")(search_command)


# -- JSON shapes --------------------------------------------------------------------------------


def _transition_json(moved: Transition) -> dict[str, Any]:
    data = moved.event.body["data"]
    item = {
        "record_id": moved.record.record_id,
        "tenant": moved.record.scope.tenant,
        "workspace": moved.record.scope.workspace,
        "operation": moved.operation,
        "from_state": moved.from_state,
        "to_state": moved.to_state,
        "cursor": moved.event.cursor,
        "at": format_instant(moved.event.at_ms),
        "event_id": moved.event.event_id,
        "event_digest": moved.event.event_digest,
    }
    item.update({name: data[name] for name in ("superseded_by", "replacing", "expires_at") if name in data})
    return item


def _outcome_json(outcome: MaintenanceOutcome) -> dict[str, Any]:
    primary = outcome.primary
    result: dict[str, Any] = {
        "record_id": primary.record.record_id,
        "operation": primary.operation,
        "from_state": primary.from_state,
        "to_state": primary.to_state,
        "transitions": [_transition_json(moved) for moved in _in_journal_order(outcome)],
    }
    if outcome.erasure is not None:
        result["erasure"] = dict(outcome.erasure)
    return result


def _in_journal_order(outcome: MaintenanceOutcome) -> list[Transition]:
    return sorted(outcome.transitions, key=lambda moved: moved.event.cursor)


def _transition_line(moved: Transition) -> str:
    scope = moved.record.scope
    done = _PAST_TENSE.get(moved.operation)
    line = _("{done} {record_id} ({tenant}/{workspace}): {from_state} -> {to_state}, cursor {cursor}").format(
        done=_(done) if done is not None else moved.operation,
        record_id=moved.record.record_id,
        tenant=scope.tenant,
        workspace=scope.workspace,
        from_state=moved.from_state,
        to_state=moved.to_state,
        cursor=moved.event.cursor,
    )
    data = moved.event.body["data"]
    if "superseded_by" in data:
        line += _(", superseded by {record_id}").format(record_id=data["superseded_by"])
    return line


# -- running one operation ----------------------------------------------------------------------


def _apply(home: Path | None, as_json: bool, action: Callable[[Engine], MaintenanceOutcome]) -> None:
    with opened_engine(home) as (engine, _paths):
        try:
            outcome = action(engine)
        except MaintenanceRefused as refusal:
            fail(refusal_words(refusal))
        except ContractError as fault:
            fail(f"{fault.code.value}: {_(_STORE_FAULTS.get(fault.code, _UNAVAILABLE))}")
    if as_json:
        sys.stdout.write(json.dumps(_outcome_json(outcome)) + "\n")
        return
    for moved in _in_journal_order(outcome):
        say(_transition_line(moved))
    if outcome.erasure is not None:
        surfaces = outcome.erasure["surfaces"]
        say(
            _(
                "erased: body {body}, lexical index {lexical_index}, data key {data_key}, files {physical_erasure}"
            ).format(
                body=surfaces["body"],
                lexical_index=surfaces["lexical_index"],
                data_key=surfaces["data_key"],
                physical_erasure=outcome.erasure["physical_erasure"],
            )
        )


def _option(argument: Argument) -> Any:
    """The command-line option of a declared argument: a choice, or another record's id."""
    kind: Any = StrEnum(argument.name, {value: value for value in argument.choices}) if argument.choices else str
    option = typer.Option(argument.flag, metavar=argument.metavar, help=argument.help)
    return Annotated[kind if argument.required else kind | None, option]


def operation_command(operation: HostOperation) -> Callable[..., None]:
    """The `records <operation>` command of one declared host operation (engine/lifecycle/host_operations.py)."""

    def command(
        record_id: str, reason: str | None, home: Path | None, as_json: bool, yes: bool = False, **given: str | None
    ) -> None:
        if operation.destructive and not yes:
            fail(
                _("{command} cannot be undone: repeat with --yes to confirm").format(
                    command=f"records {operation.command}"
                )
            )
        _apply(
            home,
            as_json,
            lambda engine: engine.transition(
                operation.name,
                record_id,
                decided_by=current_user(),
                reason_ref=reason,
                **{name: None if value is None else str(value) for name, value in given.items()},
            ),
        )

    keyword = inspect.Parameter.KEYWORD_ONLY
    parameters = [inspect.Parameter("record_id", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=IdArgument)]
    for argument in operation.arguments:
        missing = inspect.Parameter.empty if argument.required else None
        parameters.append(inspect.Parameter(argument.name, keyword, annotation=_option(argument), default=missing))
    if operation.destructive:
        parameters.append(inspect.Parameter("yes", keyword, annotation=_YesOption, default=False))
    for name, annotation in (("reason", ReasonOption), ("home", HomeOption), ("as_json", JsonOption)):
        parameters.append(inspect.Parameter(name, keyword, annotation=annotation, default=None))
    parameters[-1] = parameters[-1].replace(default=False)
    command.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    command.__annotations__ = {}
    command.__doc__ = operation.help
    command.__name__ = f"{operation.name}_command"
    return command


# -- automatic expiry and reads -----------------------------------------------------------------


def expire_due_command(
    limit: Annotated[int, typer.Option("--limit", min=1, help="At most this many records in one run.")] = 10_000,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Expire every record whose retention expires_at has passed (what `serve` also does periodically)."""
    with opened_engine(home) as (engine, _paths):
        try:
            expired = engine.expire_due(limit)
        except ContractError as fault:
            fail(
                _("{code}: the store is unavailable; records expired so far stay expired").format(code=fault.code.value)
            )
    if as_json:
        sys.stdout.write(json.dumps({"expired": [_transition_json(moved) for moved in expired]}) + "\n")
        return
    for moved in expired:
        say(_transition_line(moved))
    say(ngettext("{count} record expired", "{count} records expired", len(expired)).format(count=len(expired)))


def list_command(
    tenant: Annotated[str | None, typer.Option("--tenant")] = None,
    workspace: Annotated[str | None, typer.Option("--workspace")] = None,
    state: Annotated[RecordState | None, typer.Option("--state", help="Only records in this state.")] = None,
    valid_at: Annotated[
        str | None,
        typer.Option(
            "--valid-at",
            metavar="INSTANT",
            help="Only records true at this valid time (YYYY-MM-DDTHH:mm:ss.sssZ): current ones and those"
            " another superseded later; needs --tenant and --workspace.",
        ),
    ] = None,
    family: Annotated[
        str | None, typer.Option("--family", metavar="REF", help="With --valid-at: only this reconciliation family.")
    ] = None,
    known_at: Annotated[
        str | None,
        typer.Option(
            "--known-at",
            metavar="INSTANT",
            help="With --valid-at: as the store knew it at this instant (states folded from the journal).",
        ),
    ] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, help="At most this many records.")] = 1000,
    text: Annotated[
        bool | None,
        typer.Option(
            "--text/--no-text",
            help="Show each current record's text, cut short (one audited host read per record). "
            "Default: on, off with --json.",
            show_default=False,
        ),
    ] = None,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Records of every scope (or the one named), with their states and, for current ones, the start of
    their text."""
    if valid_at is not None or family is not None or known_at is not None:
        list_valid_at(tenant, workspace, state, AsOf(valid_at, family, known_at), limit, home, as_json)
        return
    # One more than asked, to tell the host whether the list was cut short.
    filters = RecordFilter(
        tenant=tenant, workspace=workspace, state=None if state is None else state.value, limit=limit + 1
    )
    show_text = (not as_json) if text is None else text
    with opened_engine(home) as (engine, _paths):
        found = engine.records(filters)
        rows = found[:limit]
        shown = previews(engine, rows, read_by=current_user(), width=LIST_PREVIEW_CHARS) if show_text else {}
    if len(found) > limit:
        note_cut_off(limit, _("records"))
    if as_json:
        listed = [record_json(row) for row in rows]
        if show_text:
            listed = [
                {**item, "text_preview": shown.get(row.record_id)} for item, row in zip(listed, rows, strict=True)
            ]
        sys.stdout.write(json.dumps(listed) + "\n")
        return
    if not rows:
        say(_("no records"))
        return
    # Ids and states never wrap or shorten (the host copies them into the next command); the rest folds.
    table = Table(box=None, pad_edge=False)
    table.add_column(_("record"), no_wrap=True, min_width=len(rows[0].record_id))
    table.add_column(_("state"), no_wrap=True)
    table.add_column(_("scope"), no_wrap=True)
    table.add_column(_("expires"), overflow="fold")
    table.add_column(_("superseded by"), overflow="fold")
    if show_text:  # last, so that it folds in the room left and the columns before it stay whole
        table.add_column(_("text"), overflow="fold", min_width=16)
    for row in rows:
        cells = [row.record_id, row.state, f"{row.scope.tenant}/{row.scope.workspace}"]
        cells += [_instant(row.expires_at_ms) or "-", row.superseded_by or "-"]
        if show_text:
            cells.append(inline(shown.get(row.record_id, "-")))
        table.add_row(*cells)
    out.print(table, markup=False, highlight=False)


def show_command(
    record_id: IdArgument,
    text: Annotated[
        bool, typer.Option("--text", help="Also decrypt and show its text and citations (an audited host read).")
    ] = False,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """One record's metadata and its state history from the journal; with --text, what it says."""
    content: dict[str, Any] | None = None
    with opened_engine(home) as (engine, _paths):
        try:
            details = engine.record_details(record_id)
        except MaintenanceRefused as refusal:
            fail(refusal_words(refusal))
        if text:
            scope = details.record.scope
            try:
                content = read_record(engine, scope.tenant, scope.workspace, record_id, read_by=current_user())
            except HostReadRefused as refused:
                fail(
                    _("the record's text cannot be read: {refused} (only a current record is readable)").format(
                        refused=refused
                    )
                )
    shown = {
        **record_json(details.record),
        "supersedes": list(details.supersedes),
        "history": [history_entry(event) for event in details.history],
    }
    if content is not None:
        shown["content"] = {key: content[key] for key in ("components", "primary_component_id", "citations")}
    if as_json:
        sys.stdout.write(json.dumps(shown) + "\n")
        return
    for name, value in shown.items():
        if name not in ("history", "supersedes", "content"):
            say(f"{_(FIELDS.get(name, name))}: {'-' if value is None else value}")
    say(_("supersedes: {records}").format(records=", ".join(details.supersedes) or "-"))
    say(_("history:"))
    for item in shown["history"]:
        reason = f" ({item['reason_ref']})" if item["reason_ref"] else ""
        say(
            _("  {cursor:>6}  {at}  {operation}: {from_state} -> {to_state} by {principal}{reason}").format(
                cursor=item["cursor"],
                at=item["at"],
                operation=item["operation"],
                from_state=item["from_state"] or "-",
                to_state=item["to_state"],
                principal=item["actor"].get("principal", "?"),
                reason=reason,
            )
        )
    if content is not None:
        say(_("text:"))
        for component in content["components"]:
            cited = ", ".join(component.get("citation_ids", []))
            cites = "  " + _("(cites {citations})").format(citations=cited) if cited else ""
            say(f"  [{component['kind']}] {component['text']}{cites}")
        say(_("citations:"))
        for citation in content["citations"]:
            locator = citation.get("locator") or {}
            where = f"{locator.get('scheme', '')}:{locator.get('value', '')}"
            say(f"  {citation['citation_id']}: {citation['source_ref']} {where}")
