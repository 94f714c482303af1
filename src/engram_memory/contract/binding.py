"""The host-owned invocation context: who is calling, for what, and in which scope.

Arguments never carry any of this; it comes only from a binding the host signed.
"""

from __future__ import annotations

from dataclasses import dataclass

TRUST_CLASSES = ("asserted", "earned", "signed")


@dataclass(frozen=True, slots=True)
class Binding:
    """A verified binding. `grants` holds full tool names; an empty set means memory is off."""

    token_id: str
    tenant: str
    workspace: str
    principal: str
    agent_id: str
    session: str
    purpose_ref: str
    grants: frozenset[str]
    confirm_mutations: bool
    issued_at_ms: int
    expires_at_ms: int
    trust_class: str = "asserted"
    # The MCP endpoint an OAuth access token was issued for (RFC 8707); None for a binding the host issued
    # with `bind`, which any of its servers accepts.
    resource: str | None = None

    def grants_tool(self, tool: str) -> bool:
        return tool in self.grants

    def expired_at(self, now_ms: int) -> bool:
        return now_ms >= self.expires_at_ms
