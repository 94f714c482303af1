"""The two envelope shapes, and nothing else: every tool result is one of them."""

from __future__ import annotations

from typing import Any

from engram_memory.contract.errors import MESSAGES, RETRIABLE, ContractError, ErrorCode

OUTPUT_SCHEMA_VERSION = 1
REDACTION_CLASS = "high"


def success(value: Any, audit_id: str) -> dict[str, Any]:
    return {
        "ok": True,
        "output": {"schema_version": OUTPUT_SCHEMA_VERSION, "value": value},
        "auditId": audit_id,
        "redactionClass": REDACTION_CLASS,
    }


def failure(code: ErrorCode, audit_id: str) -> dict[str, Any]:
    return {
        "ok": False,
        "auditId": audit_id,
        "redactionClass": REDACTION_CLASS,
        "error": {"code": code.value, "message": MESSAGES[code], "retriable": code in RETRIABLE},
    }


def refusal(error: ContractError, audit_id: str) -> dict[str, Any]:
    """The failure envelope of a contract error, with its detail and extra members."""
    envelope = failure(error.code, audit_id)
    envelope["error"] = {**envelope["error"], "message": error.message, **error.fields}
    return envelope
