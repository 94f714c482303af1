"""The tool list an agent sees: only granted tools, each rendered with the bound purpose_ref.

The input schema is the contract's own object, so what is advertised is exactly what is enforced.
"""

from __future__ import annotations

import mcp_types as types

from engram_memory.contract.binding import Binding
from engram_memory.contract.schemas import input_schema
from engram_memory.contract.tools import ALL_TOOLS, Tool

INSTRUCTIONS = (
    "Engram memory keeps durable, cited knowledge for later sessions and other agents: decisions with "
    "rationale, verified facts with sources, conventions, recurring pitfalls and their fixes, hand-off facts. "
    "Not scratch state, chat logs, raw tool output, guesses, secrets or credentials. Search before you capture; "
    "a capture is a pending draft until request_admission accepts it. The host binds your tenant, workspace, "
    "principal and purpose: never pass them. Act on error.code and error.retriable, never on the message. "
    "withdraw and forget always need a human's approval through the host: on gate_failed, tell the user and "
    "retry the identical call with the same idempotency_key once they approved it."
)

_DESCRIPTIONS: dict[Tool, str] = {
    Tool.SEARCH: (
        "Find current memories (accepted records of your workspace) with citations and a rank receipt. "
        "Zero matches is an empty list. Continue with next_page_cursor and the same query and parameters; "
        "on STALE_PAGE search again without page_cursor."
    ),
    Tool.GET: (
        "Read one current record by record_id, with a read receipt. NOT_FOUND means unknown, out of scope or "
        "no longer current (indistinguishable by design): do not probe variants."
    ),
    Tool.CAPTURE: (
        "Submit cited knowledge as an encrypted pending candidate. It is not searchable until "
        "engram_memory_request_admission accepts it, and candidate_id is not a record_id. Every component cites "
        "at least one citation; valid_time and primary_event.at are epoch milliseconds, and the record is current "
        "only while now lies in [valid_time.t, valid_time.t_end] (omit t_end for knowledge that stays true). "
        "Omit retention unless "
        "told otherwise. Never include secrets, credentials, tokens, passwords, connection strings or .env values."
    ),
    Tool.REQUEST_ADMISSION: (
        "Ask the host's admission policy to decide a pending candidate: accepted (with record_id), rejected, "
        "pending_adjudication (a human decides) or duplicate_exact (an identical current record exists; its "
        "record_id is returned). Report the outcome as it is; never rewrite content to get around a decision."
    ),
    Tool.WITHDRAW: (
        "Withdraw a pending candidate and destroy its data key. Always needs a human's approval: the first call "
        "answers gate_failed and leaves a request for the host; after approval repeat the identical call with "
        "the same idempotency_key."
    ),
    Tool.FORGET: (
        "Forget an admitted record: it becomes terminally ineligible, its data key is destroyed and it is "
        "purged from every index. Always needs a human's approval: the first call answers gate_failed and "
        "leaves a request for the host; after approval repeat the identical call with the same idempotency_key."
    ),
}

_ANNOTATIONS: dict[Tool, types.ToolAnnotations] = {
    Tool.SEARCH: types.ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False),
    Tool.GET: types.ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False),
    Tool.CAPTURE: types.ToolAnnotations(
        read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
    ),
    Tool.REQUEST_ADMISSION: types.ToolAnnotations(
        read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
    ),
    Tool.WITHDRAW: types.ToolAnnotations(
        read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
    ),
    Tool.FORGET: types.ToolAnnotations(
        read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
    ),
}


def describe(tool: Tool, purpose_ref: str) -> str:
    if tool is Tool.CAPTURE:
        tail = f' Your purpose_ref is "{purpose_ref}": pass it exactly as payload.purpose_ref.'
    elif tool in (Tool.SEARCH, Tool.GET):
        tail = f' Your purpose_ref is "{purpose_ref}": pass it exactly as purpose_ref.'
    else:
        tail = f' This session is bound to purpose_ref "{purpose_ref}".'
    return _DESCRIPTIONS[tool] + tail


def tool_definitions(binding: Binding | None) -> list[types.Tool]:
    """Granted tools only; no binding or no grant means no memory tools at all.

    No output schema: every tool answers the same envelope, which an output schema could only describe
    as `value: object`, and it cost every turn 116 tokens a tool (the text block carries the same JSON).
    """
    if binding is None:
        return []
    return [
        types.Tool(
            name=tool.value,
            title=tool.short_name.replace("_", " ").capitalize() + " memory",
            description=describe(tool, binding.purpose_ref),
            input_schema=input_schema(tool),
            annotations=_ANNOTATIONS[tool],
        )
        for tool in ALL_TOOLS
        if binding.grants_tool(tool.value)
    ]
