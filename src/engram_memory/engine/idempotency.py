"""Why a call is a replay, a conflict, or new.

The operation digest covers the tool and its whole canonical arguments, so the same key with the
same arguments replays, and the same key with anything else conflicts, whatever the tool.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engram_memory.contract.canonical import OPERATION_DOMAIN, digest
from engram_memory.contract.errors import ContractError, ErrorCode
from engram_memory.contract.tools import Tool
from engram_memory.engine.ports.store import IdempotencyRow


def operation_digest(tool: Tool, arguments: Mapping[str, Any]) -> str:
    return digest(OPERATION_DOMAIN, {"tool": tool.value, "arguments": dict(arguments)})


def replayed_response(prior: IdempotencyRow | None, tool: Tool, op_digest: str) -> Mapping[str, Any] | None:
    """The recorded response when this call already ran; None when it is new.

    Raises ContractError DIGEST_CONFLICT when the key was used for another tool or other arguments.
    """
    if prior is None:
        return None
    if prior.tool != tool.value or prior.operation_digest != op_digest:
        raise ContractError(ErrorCode.DIGEST_CONFLICT)
    return prior.response
