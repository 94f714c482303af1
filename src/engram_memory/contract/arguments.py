"""A tool's validated arguments as one typed value, made once at the edge, with the schema's defaults.

The schema (contract/schemas.py) is the one home of every default: an argument the agent left out takes
the `default` its property declares, read here, so the engine never restates one. A mutating tool also
keeps the arguments exactly as given (`given`), because its idempotency digest covers what the agent
sent, not what the defaults made of it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from engram_memory.contract.schemas import schema_for_validation
from engram_memory.contract.tools import Tool

__all__ = [
    "AdmissionArguments",
    "CaptureArguments",
    "ForgetArguments",
    "GetArguments",
    "MutatingArguments",
    "SearchArguments",
    "ToolArguments",
    "WithdrawArguments",
    "schema_default",
    "typed_arguments",
]


def schema_default(tool: Tool, *path: str) -> Any:
    """The `default` the schema of `tool` declares for the property at `path` (names of nested objects)."""
    schema: Mapping[str, Any] = schema_for_validation(tool)
    for name in path:
        schema = schema["properties"][name]
    return schema["default"]


def _given(arguments: Mapping[str, Any], tool: Tool, *path: str) -> Any:
    value: Any = arguments
    for name in path:
        if not isinstance(value, Mapping) or name not in value:
            return schema_default(tool, *path)
        value = value[name]
    return value


class _NamesNoPurpose:
    """A tool whose arguments claim no purpose (the binding's alone applies)."""

    __slots__ = ()
    purpose_ref: ClassVar[None] = None


@dataclass(frozen=True, slots=True)
class SearchArguments:
    query: str
    purpose_ref: str
    limit: int
    max_packet_bytes: int
    minimum_channels: str
    network: str
    page_cursor: str | None


@dataclass(frozen=True, slots=True)
class GetArguments:
    record_id: str
    purpose_ref: str
    max_packet_bytes: int


@dataclass(frozen=True, slots=True)
class CaptureArguments:
    idempotency_key: str
    payload: Mapping[str, Any]
    evidence: Mapping[str, Any]
    given: Mapping[str, Any]

    @property
    def purpose_ref(self) -> str:
        """A capture names its purpose inside the payload it stores."""
        return str(self.payload["purpose_ref"])


@dataclass(frozen=True, slots=True)
class AdmissionArguments(_NamesNoPurpose):
    candidate_id: str
    idempotency_key: str
    given: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class WithdrawArguments(_NamesNoPurpose):
    candidate_id: str
    idempotency_key: str
    reason_ref: str
    given: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class ForgetArguments(_NamesNoPurpose):
    record_id: str
    idempotency_key: str
    reason_ref: str
    given: Mapping[str, Any]


MutatingArguments = CaptureArguments | AdmissionArguments | WithdrawArguments | ForgetArguments
ToolArguments = SearchArguments | GetArguments | MutatingArguments


def typed_arguments(tool: Tool, valid: Mapping[str, Any]) -> ToolArguments:
    """`valid`: arguments `validate_arguments` accepted for `tool` (so every required one is there)."""
    match tool:
        case Tool.SEARCH:
            return SearchArguments(
                query=valid["query"],
                purpose_ref=valid["purpose_ref"],
                limit=_given(valid, tool, "limit"),
                max_packet_bytes=_given(valid, tool, "max_packet_bytes"),
                minimum_channels=_given(valid, tool, "capability_policy", "minimum_channels"),
                network=_given(valid, tool, "capability_policy", "network"),
                page_cursor=valid.get("page_cursor"),
            )
        case Tool.GET:
            return GetArguments(valid["record_id"], valid["purpose_ref"], _given(valid, tool, "max_packet_bytes"))
        case Tool.CAPTURE:
            return CaptureArguments(valid["idempotency_key"], valid["payload"], valid["evidence"], valid)
        case Tool.REQUEST_ADMISSION:
            return AdmissionArguments(valid["candidate_id"], valid["idempotency_key"], valid)
        case Tool.WITHDRAW:
            return WithdrawArguments(valid["candidate_id"], valid["idempotency_key"], valid["reason_ref"], valid)
        case Tool.FORGET:
            return ForgetArguments(valid["record_id"], valid["idempotency_key"], valid["reason_ref"], valid)
