"""Records: browse a workspace as the host, search it as its agents would, read one record, act on it, export.

Browsing lists metadata only. Text is shown through the host read path (host/reads.py): the agents'
own search and get under a host binding, each read audited as `host:<user>`. A search's words travel
in a POST body, never in the address, so no memory text lands in a URL or a log.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from engram_memory.contract.errors import ContractError
from engram_memory.contract.payloads import primary_text
from engram_memory.contract.states import RecordState
from engram_memory.engine.lifecycle.host_transitions import MaintenanceRefused
from engram_memory.engine.ports.maintenance import RecordFilter
from engram_memory.host.console.actions import form_arguments, outcome_line
from engram_memory.host.console.context import console_of, reason_field, text_field
from engram_memory.host.console.views import after_decision, refusal, render
from engram_memory.host.language.catalogue import _
from engram_memory.host.language.words import refusal as refusal_words
from engram_memory.host.reads import HostReadRefused, previews, read_record, search_records
from engram_memory.host.record_history import history_entry
from engram_memory.host.transfer import TransferError, export_lines

# Each current record shown is read (audited) for its preview, so a page lists fewer than the CLI does.
SHOWN = 100
STATES = tuple(state.value for state in RecordState)


def _filters(request: Request) -> dict[str, str]:
    shown: dict[str, str] = {}
    for name in ("tenant", "workspace", "state"):
        value = request.query_params.get(name, "").strip()
        if value and len(value) <= 512:
            shown[name] = value
    return shown


def records_page(request: Request) -> Response:
    chosen = _filters(request)
    state = chosen.get("state") if chosen.get("state") in STATES else None
    console = console_of(request)
    found = console.engine.records(
        RecordFilter(tenant=chosen.get("tenant"), workspace=chosen.get("workspace"), state=state, limit=SHOWN + 1)
    )
    rows = found[:SHOWN]
    return render(
        request,
        "records.html",
        rows=rows,
        previews=previews(console.engine, rows, read_by=console.decided_by),
        more=len(found) > SHOWN,
        chosen=chosen,
        states=STATES,
        hits=None,
        query="",
        active="records",
    )


def records_search(request: Request, form: FormData) -> Response:
    console = console_of(request)
    tenant, workspace = text_field(form, "tenant", limit=512), text_field(form, "workspace", limit=512)
    query = text_field(form, "query", limit=2000)
    hits: list[dict[str, Any]] = []
    problem = None
    if tenant is None or workspace is None or query is None:
        problem = _("Name a tenant, a workspace and what to look for.")
    else:
        try:
            packets = search_records(console.engine, tenant, workspace, query, limit=20, read_by=console.decided_by)
        except HostReadRefused as refused:
            problem = _("The search was refused: {code}.").format(code=refused)
        else:
            hits = [{"record_id": p["record"]["record_id"], "text": primary_text(p["record"])} for p in packets]
    return render(
        request,
        "records.html",
        rows=[],
        previews={},
        more=False,
        chosen={"tenant": tenant or "", "workspace": workspace or ""},
        states=STATES,
        hits=hits,
        query=query or "",
        notice=problem,
        active="records",
    )


def record_page(request: Request) -> Response:
    console = console_of(request)
    record_id = request.path_params["record_id"]
    try:
        details = console.engine.record_details(record_id)
    except MaintenanceRefused:
        return refusal(404)
    content = None
    row = details.record
    if row.state == RecordState.ACCEPTED_CURRENT.value:
        try:
            content = read_record(
                console.engine, row.scope.tenant, row.scope.workspace, record_id, read_by=console.decided_by
            )
        except HostReadRefused:
            content = None
    return render(
        request,
        "record.html",
        row=row,
        details=details,
        history=[history_entry(event) for event in details.history],
        content=content,
        operations=console.engine.host_operations(),
        arguments=form_arguments(console.engine.host_operations()),
        notice=request.query_params.get("notice"),
        active="records",
    )


def record_action(request: Request, form: FormData) -> Response:
    console = console_of(request)
    record_id = request.path_params["record_id"]
    operations = console.engine.host_operations()
    operation = operations.get(text_field(form, "operation", limit=64) or "")
    back = f"/records/{record_id}"
    if operation is None:
        return after_decision(back, _("Choose an operation."))
    reason = reason_field(form)
    given = {argument.name: text_field(form, argument.name, limit=200) for argument in operation.arguments}
    for argument in operation.arguments:
        if argument.required and given[argument.name] is None:
            needs = _("{operation} needs: {field}.").format(operation=_(operation.label), field=_(argument.label))
            return after_decision(back, needs)
    if form.get("confirmed") != "yes":
        return render(
            request,
            "record_confirm.html",
            record_id=record_id,
            operation=operation,
            given=[(argument, given[argument.name]) for argument in operation.arguments if given[argument.name]],
            reason=reason or "",
            active="records",
        )
    try:
        outcome = console.engine.transition(
            operation.name, record_id, decided_by=console.decided_by, reason_ref=reason, **given
        )
    except MaintenanceRefused as refused:
        return after_decision(back, _("Not done: {reason}").format(reason=refusal_words(refused)))
    except ContractError as fault:
        return after_decision(back, _("Not done: {code}.").format(code=fault.code.value))
    return after_decision(back, outcome_line(outcome))


def records_export(request: Request) -> Response:
    """A workspace's current memories as export lines (`engram-memory-export/1`), as `export` writes them."""
    console = console_of(request)
    chosen = _filters(request)
    tenant, workspace = chosen.get("tenant"), chosen.get("workspace")
    if tenant is None or workspace is None:
        return refusal(400)
    try:
        lines = list(export_lines(console.engine, tenant, workspace, read_by=console.decided_by))
    except (HostReadRefused, TransferError):
        return refusal(409)

    def body() -> Iterator[bytes]:
        for line in lines:
            yield (json.dumps(line, ensure_ascii=False) + "\n").encode()

    return StreamingResponse(
        body(),
        media_type="application/x-ndjson",
        headers={"content-disposition": 'attachment; filename="engram-export.jsonl"'},
    )
