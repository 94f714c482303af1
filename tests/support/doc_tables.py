"""The Markdown tables of README.md and docs/ that restate the contract, rendered from the contract itself.

The docs call these from `[[[cog ... ]]]` blocks (inside HTML comments); `make docs` rewrites them and
tests/test_docs.py fails when a committed table differs from what the contract renders now.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from engram_memory.contract.checks import ORDER_OF_CHECKS
from engram_memory.contract.errors import (
    PROTOCOL_FAULT_MESSAGES,
    PROTOCOL_FAULT_WHEN,
    RETRIABLE,
    WHEN_RETURNED,
    ErrorCode,
)
from engram_memory.contract.schemas import UTF8_BYTES, schema_for_validation
from engram_memory.contract.states import (
    AGENT_OPERATIONS,
    CANDIDATE_TRANSITIONS,
    PERFORMED_BY,
    RECORD_TRANSITIONS,
    TERMINAL_RECORD_STATES,
    CandidateState,
    Operation,
    RecordState,
)
from engram_memory.contract.tools import (
    ALL_TOOLS,
    ALWAYS_GATED_TOOLS,
    OPTIONALLY_GATED_TOOLS,
    READ_ONLY_TOOLS,
    SUMMARIES,
    Tool,
)

RANGE = "\N{EN DASH}"  # between the bounds of a range, as the prose of the docs writes them


def table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """A GitHub Markdown table, set off by blank lines so the cog markers around it stay out of it."""
    lines = [_row(header), "|" + "---|" * len(header)]
    lines += [_row(row) for row in rows]
    return "\n" + "\n".join(lines) + "\n\n"


def _row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"


def _number(n: int) -> str:
    return f"{n:,}"


def _field(name: str, schema: Mapping[str, Any]) -> str:
    """`name` and, where the schema says it in a few words, its bounds: `limit` (1 to 50, default 10)."""
    facts: list[str] = []
    if UTF8_BYTES in schema:
        minimum, maximum = schema[UTF8_BYTES]
        facts.append(f"{_number(minimum)}{RANGE}{_number(maximum)} bytes")
    elif "pattern" in schema:
        facts.append(f"`{schema['pattern']}`")
    elif schema.get("type") == "integer" and "minimum" in schema and "maximum" in schema:
        facts.append(f"{_number(schema['minimum'])}{RANGE}{_number(schema['maximum'])}")
    elif schema.get("type") == "object":
        facts.append("object")
    if "default" in schema:
        default = schema["default"]
        facts.append(f"default {_number(default) if isinstance(default, int) else default}")
    return f"`{name}`" + (f" ({', '.join(facts)})" if facts else "")


def _fields(tool: Tool, *, required: bool) -> str:
    schema = schema_for_validation(tool)
    names = [name for name in schema["properties"] if (name in schema["required"]) == required]
    return ", ".join(_field(name, schema["properties"][name]) for name in names) or "none"


def _gate(tool: Tool) -> str:
    if tool in ALWAYS_GATED_TOOLS:
        return "always"
    if tool in OPTIONALLY_GATED_TOOLS:
        return "under a `--confirm-mutations` binding"
    return "never"


def tool_summary() -> str:
    """README.md: each tool and what an agent can do with it."""
    rows = []
    for tool in ALL_TOOLS:
        summary = SUMMARIES[tool] + (" (a human must approve)" if tool in ALWAYS_GATED_TOOLS else "")
        rows.append((f"`{tool.value}`", summary))
    return table(("tool", "what the agent can do"), rows)


def tool_overview() -> str:
    """docs/tools.md: each tool's kind, confirmation gate and top-level inputs, from its input schema."""
    rows = [
        (
            f"`{tool.value}`",
            "read-only" if tool in READ_ONLY_TOOLS else "changes memory",
            _gate(tool),
            _fields(tool, required=True),
            _fields(tool, required=False),
        )
        for tool in ALL_TOOLS
    ]
    return table(("tool", "kind", "confirmation gate", "required inputs", "optional inputs"), rows)


def protocol_errors() -> str:
    """docs/errors.md: the JSON-RPC errors of calls that never reached the memory contract."""
    rows = [(str(code), f"`{message}`", PROTOCOL_FAULT_WHEN[code]) for code, message in PROTOCOL_FAULT_MESSAGES.items()]
    return table(("code", "message", "when"), rows)


def error_codes() -> str:
    """docs/errors.md: every envelope error code, whether it is retriable, and when it is returned."""
    rows = [(code.value, "yes" if code in RETRIABLE else "no", WHEN_RETURNED[code]) for code in ErrorCode]
    return table(("code", "retriable", "returned by this version when"), rows)


def _performers(operation: Operation) -> str:
    who = [
        f"agent: `{tool.value}`" + (", gated" if tool in ALWAYS_GATED_TOOLS else "")
        for tool, performed in AGENT_OPERATIONS.items()
        if performed is operation
    ]
    if operation in PERFORMED_BY:
        who.append(PERFORMED_BY[operation])
    return "; ".join(who)


def _states(states: Iterable[str], order: Sequence[str], joiner: str) -> str:
    wanted = set(states)
    return joiner.join(state for state in order if state in wanted)


def transitions() -> str:
    """docs/lifecycle.md: every legal transition, who performs it, from which states and to which."""
    candidate_order = [state.value for state in CandidateState]
    record_order = [state.value for state in RecordState]
    live = frozenset(RecordState) - TERMINAL_RECORD_STATES
    rows = [
        (
            f"{operation.value} ({_performers(operation)})",
            _states(sources, candidate_order, ", "),
            to.value,
        )
        for operation, (sources, to) in CANDIDATE_TRANSITIONS.items()
    ]
    for operation, (record_sources, targets) in RECORD_TRANSITIONS.items():
        if record_sources == live:
            terminal = _states(TERMINAL_RECORD_STATES, record_order, ", ")
            source_text = f"any record state but {terminal}"
        else:
            source_text = _states(record_sources, record_order, ", ")
        rows.append(
            (f"{operation.value} ({_performers(operation)})", source_text, _states(targets, record_order, " or "))
        )
    return table(("operation (who)", "from", "to"), rows)


def order_of_checks() -> str:
    """The numbered list of docs/tools.md's "Order of checks"."""
    lines = [f"{n}. {check.value}: {answer};" for n, (check, answer) in enumerate(ORDER_OF_CHECKS.items(), 1)]
    lines[-1] = lines[-1].removesuffix(";") + "."
    return "\n" + "\n".join(lines) + "\n"
