"""The tool list an agent sees: only granted tools, each rendered with the bound purpose_ref.

The input schema is the contract's own object, so what is advertised is exactly what is enforced.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import mcp_types as types

from engram_memory.contract.binding import Binding
from engram_memory.contract.payloads import Citation, one_source_payload
from engram_memory.contract.schemas import input_schema
from engram_memory.contract.tools import ALL_TOOLS, Tool

INSTRUCTIONS = (
    "Engram memory keeps durable, cited knowledge for later sessions and other agents: decisions with "
    "rationale, verified facts with sources, conventions, recurring pitfalls and their fixes, hand-off facts. "
    "Not scratch state, chat logs, raw tool output, guesses, secrets or credentials. Search before you capture; "
    "a capture is a pending draft until request_admission accepts it. The host binds your tenant, workspace, "
    "principal and purpose: never pass them. Act on error.code and error.retriable; on INVALID_SCHEMA or "
    "INVALID_DIGEST the message names the field and the rule to fix. withdraw and forget always need a human's "
    "approval through the host: on gate_failed, give the user error.for_the_person and retry the identical call "
    "with the same idempotency_key once they approved it. The whole guide: the memory_guide prompt."
)

_DESCRIPTIONS: Mapping[Tool, str] = MappingProxyType(
    {
        Tool.SEARCH: (
            "Find current memories of your workspace, cited and ranked; none relevant is an empty list. Next page: the "
            "same arguments plus next_page_cursor (on STALE_PAGE search again without it)."
        ),
        Tool.GET: (
            "Read one current record by record_id. NOT_FOUND: unknown, out of scope or no longer current, alike by "
            "design; do not probe variants."
        ),
        Tool.CAPTURE: (
            "Save cited knowledge as a pending candidate; only request_admission makes it a searchable record. "
            "Every component cites a citation; times are epoch ms; omit retention unless told. Never secrets or "
            "credentials."
        ),
        Tool.REQUEST_ADMISSION: (
            "Ask the host's policy to admit a captured candidate: accepted (record_id), rejected, "
            "pending_adjudication (a person decides; repeat the call later for the result) or duplicate_exact "
            "(the existing record_id); reasons say why. Never reword to get past them."
        ),
        Tool.WITHDRAW: (
            "Withdraw a pending candidate, destroying its data. A person must approve: the first call answers "
            "gate_failed; once approved, repeat it."
        ),
        Tool.FORGET: (
            "Forget an admitted record for good: its key is destroyed and it leaves every index. A person must "
            "approve: the first call answers gate_failed; once approved, repeat it."
        ),
    }
)

_ANNOTATIONS: Mapping[Tool, types.ToolAnnotations] = MappingProxyType(
    {
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
)


# One worked example per mutating tool, valid as it stands (a test sends each exactly as the description
# shows it): agents copy shapes more reliably than they read schemas.
_EXAMPLE_TEXT = "Deploys freeze on Fridays after 15:00 UTC."
_EXAMPLE_AT_MS = 1_764_547_200_000  # 2025-12-01T00:00:00Z
_EXAMPLE_DIGEST = "sha256:" + hashlib.sha256(_EXAMPLE_TEXT.encode("utf-8")).hexdigest()


def capture_example(purpose_ref: str) -> dict[str, Any]:
    digest = _EXAMPLE_DIGEST
    source = Citation("s1", "wiki:release-policy", "document", "#freeze", digest)
    payload = one_source_payload(
        purpose_ref,
        _EXAMPLE_TEXT,
        _EXAMPLE_AT_MS,
        source,
        kind="decision",
        component_id="c1",
        event_type="event:decision-made",
    )
    evidence = {"evidence_ref": "wiki:release-policy", "evidence_digest": digest, "citation_ids": ["s1"]}
    return {"idempotency_key": "capture-release-freeze-0001", "payload": payload, "evidence": evidence}


_SHORT_EXAMPLES: Mapping[Tool, dict[str, str]] = MappingProxyType(
    {
        Tool.REQUEST_ADMISSION: {"candidate_id": "cand_…", "idempotency_key": "admit-release-freeze-0001"},
        Tool.WITHDRAW: {
            "candidate_id": "cand_…",
            "idempotency_key": "withdraw-ops-12-0001",
            "reason_ref": "ticket:OPS-12",
        },
        Tool.FORGET: {"record_id": "mem_…", "idempotency_key": "forget-ops-12-00001", "reason_ref": "ticket:OPS-12"},
    }
)


def _compact(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def describe(tool: Tool, purpose_ref: str) -> str:
    tail = f' Your purpose_ref is "{purpose_ref}".'
    if tool is Tool.CAPTURE:
        tail += (
            ' Digests: "sha256:" + 64 hex of the cited text. A new idempotency_key per capture, the same on a '
            "retry. Example: " + _compact(capture_example(purpose_ref))
        )
    elif tool in _SHORT_EXAMPLES:
        tail += " Example: " + _compact(_SHORT_EXAMPLES[tool])
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
