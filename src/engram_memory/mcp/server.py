"""The MCP server on the SDK's low-level `Server`: our schemas verbatim, our envelopes, our errors.

Only two things cross this edge as JSON-RPC errors (`-32603`, `-32602`); everything else is an
envelope sent as `structuredContent` plus the same JSON as text, with `isError == !ok`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError

from engram_memory import __version__
from engram_memory.contract.binding import Binding
from engram_memory.contract.errors import ErrorCode, ProtocolFault
from engram_memory.contract.schema_faults import schema_fault
from engram_memory.contract.schemas import input_schema
from engram_memory.contract.tools import Tool
from engram_memory.engine.engine import GROUPED_TOOLS, AgentCall, AnswersCalls
from engram_memory.mcp.grouping import CallGroups
from engram_memory.mcp.guide import GUIDE_PROMPT, PROMPT, guide
from engram_memory.mcp.tools import INSTRUCTIONS, tool_definitions

SERVER_NAME = "engram-memory"

BindingSource = Callable[[ServerRequestContext[Any]], Binding | None]
# Told of every tool call once answered: its tool name, its outcome ("ok" or the error code), its seconds.
CallObserver = Callable[[str, str, float], None]


# The `_meta` key of a refused call's fault: where the arguments broke the contract (contract/validate.py).
FAULT_META_KEY = "engram-memory/invalid"
_FAULT_CODES = frozenset({ErrorCode.INVALID_SCHEMA.value, ErrorCode.INVALID_DIGEST.value})


def tool_result(envelope: dict[str, Any], meta: dict[str, Any] | None = None) -> types.CallToolResult:
    text = json.dumps(envelope, ensure_ascii=False, separators=(",", ":"))
    return types.CallToolResult(
        _meta=meta,
        content=[types.TextContent(type="text", text=text)],
        structured_content=envelope,
        is_error=not envelope["ok"],
    )


def fault_meta(envelope: Mapping[str, Any], name: str, arguments: object) -> dict[str, Any] | None:
    """For an INVALID_SCHEMA or INVALID_DIGEST answer, which field failed and by which rule, beside the
    closed envelope (whose message stays constant): the pointer names only the agent's own arguments."""
    if envelope["ok"] or envelope["error"]["code"] not in _FAULT_CODES:
        return None
    try:
        tool = Tool(name)
    except ValueError:
        return None
    fault = schema_fault(tool, arguments)
    return None if fault is None else {FAULT_META_KEY: {"pointer": fault.pointer, "rule": fault.rule}}


def _input_schema_of(name: str) -> Mapping[str, Any] | None:
    """The schema the HTTP transport checks `Mcp-Param-*` headers against. Without it the SDK runs the
    whole tools/list handler again for every tool call (a fifth of a call's CPU on the server)."""
    try:
        return input_schema(Tool(name))
    except ValueError:
        return None


def build_server(
    engine: AnswersCalls,
    binding_source: BindingSource,
    *,
    observe: CallObserver | None = None,
) -> Server[Any]:
    """`binding_source` gives the verified binding of the request (the stdio server's own, a request's
    bearer token on HTTP); a stdio server without a usable one is refused at `initialize` (mcp/stdio.py)."""

    async def list_tools(
        ctx: ServerRequestContext[Any], _params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tool_definitions(binding_source(ctx)))

    async def list_prompts(
        _ctx: ServerRequestContext[Any], _params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        return types.ListPromptsResult(prompts=[PROMPT])

    async def get_prompt(
        _ctx: ServerRequestContext[Any], params: types.GetPromptRequestParams
    ) -> types.GetPromptResult:
        language = (params.arguments or {}).get("language")
        answer = guide(language) if params.name == GUIDE_PROMPT else None
        if answer is None:
            raise MCPError(code=types.INVALID_PARAMS, message="Unknown prompt or language")
        return answer

    groups = CallGroups(engine)

    async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        binding = binding_source(ctx)
        started = time.perf_counter()
        try:
            if params.name in GROUPED_TOOLS:
                envelope = await groups.answer(AgentCall(binding, params.name, params.arguments))
            else:
                envelope = await anyio.to_thread.run_sync(engine.handle, binding, params.name, params.arguments)
        except ProtocolFault as fault:
            if observe is not None:
                observe(params.name, "protocol_error", time.perf_counter() - started)
            raise MCPError(code=fault.code, message=fault.message) from None
        if observe is not None:
            outcome = "ok" if envelope["ok"] else str(envelope["error"]["code"])
            observe(params.name, outcome, time.perf_counter() - started)
        return tool_result(envelope, fault_meta(envelope, params.name, params.arguments))

    return Server(
        SERVER_NAME,
        get_tool_input_schema=_input_schema_of,
        version=__version__,
        title="Engram memory",
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
        on_call_tool=call_tool,
    )
