"""The six agent tools by name, and what kind of operation each one is.

Names are the contract's; everything that dispatches on a tool uses these constants.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from types import MappingProxyType


class Tool(StrEnum):
    SEARCH = "engram_memory_search"
    GET = "engram_memory_get"
    CAPTURE = "engram_memory_capture"
    REQUEST_ADMISSION = "engram_memory_request_admission"
    WITHDRAW = "engram_memory_withdraw"
    FORGET = "engram_memory_forget"

    @property
    def short_name(self) -> str:
        return self.value.removeprefix("engram_memory_")


ALL_TOOLS: tuple[Tool, ...] = tuple(Tool)
READ_ONLY_TOOLS = frozenset({Tool.SEARCH, Tool.GET})
MUTATING_TOOLS = frozenset({Tool.CAPTURE, Tool.REQUEST_ADMISSION, Tool.WITHDRAW, Tool.FORGET})
ALWAYS_GATED_TOOLS = frozenset({Tool.WITHDRAW, Tool.FORGET})
OPTIONALLY_GATED_TOOLS = frozenset({Tool.CAPTURE, Tool.REQUEST_ADMISSION})

# What an agent can do with each tool, one line in Markdown, for the README's tool table (generated from it).
# The agent's own description is in mcp/tools.py; this is for the people who run the host.
SUMMARIES: Mapping[Tool, str] = MappingProxyType(
    {
        Tool.SEARCH: (
            "find current memories of its workspace, ranked (BM25F fused with one embedding model for every language), "
            "with citations and a rank receipt"
        ),
        Tool.GET: "read one current record with a read receipt",
        Tool.CAPTURE: "submit cited knowledge as an encrypted, pending candidate",
        Tool.REQUEST_ADMISSION: "ask the host's admission policy to decide a candidate",
        Tool.WITHDRAW: "withdraw a pending candidate",
        Tool.FORGET: "forget a record for good",
    }
)


def tool_from_name(name: str) -> Tool | None:
    """The tool a full name (`engram_memory_search`) or short name (`search`) refers to."""
    for tool in Tool:
        if name in (tool.value, tool.short_name):
            return tool
    return None
