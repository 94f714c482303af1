"""`MemoryClient`: remember, search and get over an MCP session, with the contract's details done right.

What an agent gets wrong by hand, done here: the capture payload's shape and cross-references, `sha256:`
digests, epoch-millisecond instants, and idempotency keys that survive a retry. A `remember` that fails
part-way (a dropped connection, a retriable error) can be called again with the same text and source:
it re-sends the identical capture under the same key, which the server replays instead of storing a
second candidate, then asks for admission under its own kept key.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

SEARCH = "engram_memory_search"
GET = "engram_memory_get"
CAPTURE = "engram_memory_capture"
REQUEST_ADMISSION = "engram_memory_request_admission"

KINDS = ("decision", "evidence", "context")
FAULT_META_KEY = "engram-memory/invalid"
MAX_PENDING = 1_024
_PURPOSE_IN_DESCRIPTION = re.compile(r'Your purpose_ref is "([^"]+)"')


class ToolCaller(Protocol):
    """What the SDK's `Client` and `ClientSession` offer: one tool call, answered with a CallToolResult."""

    async def call_tool(self, name: str, arguments: dict[str, Any] | None = None) -> Any: ...


class EngramError(Exception):
    """A refused call: the contract's error code, its message (for INVALID_SCHEMA / INVALID_DIGEST it names
    each faulty field and its rule), whether a retry may succeed, the JSON pointer of the first faulty
    field, and for gate_failed the confirmation request a person must approve and one sentence for them."""

    def __init__(
        self,
        code: str,
        message: str,
        retriable: bool,
        pointer: str | None = None,
        *,
        confirmation_request_id: str | None = None,
        for_the_person: str | None = None,
    ) -> None:
        super().__init__(f"{code}: {message}" + (f" {for_the_person}" if for_the_person else ""))
        self.code = code
        self.retriable = retriable
        self.pointer = pointer
        self.confirmation_request_id = confirmation_request_id
        self.for_the_person = for_the_person


@dataclass(frozen=True)
class Remembered:
    """What admission decided: `accepted` and `duplicate_exact` carry the record_id (a duplicate's is the
    memory that already says it); `pending_adjudication` waits for a person: calling `remember` again with
    the same arguments repeats the same calls and returns the person's decision once made; `rejected` is
    final. `reasons` say why it was not simply accepted (rule and detector names, never text);
    `superseded`: the records of its families it made historical."""

    candidate_id: str
    status: str
    record_id: str | None
    superseded: tuple[str, ...] = ()
    reasons: tuple[str, ...] = ()


@dataclass(frozen=True)
class Memory:
    record_id: str
    text: str
    source_ref: str
    score: float | None


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _sha256(data: str | bytes) -> str:
    raw = data.encode("utf-8") if isinstance(data, str) else data
    return "sha256:" + hashlib.sha256(raw).hexdigest()


def _new_key(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(12)}"


class MemoryClient:
    """Long-term memory for an agent, over an MCP session to engram-memory.

    `purpose_ref` is the one the host bound to the session (the tool descriptions state it; `discover`
    reads it from there). `now_ms` is the clock instants come from.
    """

    def __init__(self, session: ToolCaller, purpose_ref: str, *, now_ms: Callable[[], int] = _now_ms) -> None:
        self._session = session
        self.purpose_ref = purpose_ref
        self._now_ms = now_ms
        # A remember's arguments, kept by what it says, so that calling it again retries the same calls.
        self._pending: dict[str, tuple[dict[str, Any], str]] = {}

    @classmethod
    async def discover(cls, session: Any, *, now_ms: Callable[[], int] = _now_ms) -> MemoryClient:
        """A client whose purpose_ref is the one the server's tool list states (needs `list_tools`)."""
        listed = await session.list_tools()
        for tool in listed.tools:
            found = _PURPOSE_IN_DESCRIPTION.search(tool.description or "")
            if found:
                return cls(session, found.group(1), now_ms=now_ms)
        raise EngramError("UNKNOWN_TOOL", "the server lists no memory tool that states a purpose_ref", False)

    # -- writing -----------------------------------------------------------------------------------
    async def remember(
        self,
        text: str,
        *,
        source: str,
        kind: str = "evidence",
        locator: tuple[str, str] | None = None,
        source_content: str | bytes | None = None,
        event_type: str = "event:noted",
        valid_from_ms: int | None = None,
        valid_until_ms: int | None = None,
        context: str | None = None,
        family_refs: Sequence[str] = (),
    ) -> Remembered:
        """Captures `text`, cited to `source` (a document, commit, ticket or URL reference), and asks for
        its admission. `locator` is (scheme, value) within the source, `source_content` what was read
        there (its digest is the citation's; the text's own when absent). Never pass secrets."""
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {', '.join(KINDS)}")
        fingerprint = json.dumps(
            [text, source, kind, locator, event_type, valid_from_ms, valid_until_ms, context, sorted(family_refs)],
            ensure_ascii=False,
        )
        if fingerprint not in self._pending:
            if len(self._pending) >= MAX_PENDING:  # the oldest unfinished remember is given up
                del self._pending[next(iter(self._pending))]
            self._pending[fingerprint] = (
                self._capture_arguments(
                    text,
                    source,
                    kind,
                    locator,
                    source_content,
                    event_type,
                    valid_from_ms,
                    valid_until_ms,
                    context,
                    family_refs,
                ),
                _new_key("admit"),
            )
        arguments, admission_key = self._pending[fingerprint]
        captured = await self._value(CAPTURE, arguments)
        candidate_id = str(captured["candidate_id"])
        decided = await self._value(REQUEST_ADMISSION, {"candidate_id": candidate_id, "idempotency_key": admission_key})
        outcome = decided["outcome"]
        if outcome["status"] != "pending_adjudication":  # kept: the same calls later learn the decision
            del self._pending[fingerprint]
        record_id = outcome.get("record_id")
        superseded = tuple(str(other) for other in outcome.get("superseded_record_ids", ()))
        reasons = tuple(str(reason) for reason in outcome.get("reasons", ()))
        return Remembered(
            candidate_id, str(outcome["status"]), None if record_id is None else str(record_id), superseded, reasons
        )

    def _capture_arguments(
        self,
        text: str,
        source: str,
        kind: str,
        locator: tuple[str, str] | None,
        source_content: str | bytes | None,
        event_type: str,
        valid_from_ms: int | None,
        valid_until_ms: int | None,
        context: str | None,
        family_refs: Sequence[str],
    ) -> dict[str, Any]:
        at = self._now_ms() if valid_from_ms is None else valid_from_ms
        scheme, where = locator if locator is not None else ("document", source)
        components = [{"component_id": "main", "kind": kind, "text": text, "citation_ids": ["src"]}]
        if context is not None:
            components.append({"component_id": "context", "kind": "context", "text": context, "citation_ids": ["src"]})
        valid_time: dict[str, int] = {"t": at}
        if valid_until_ms is not None:
            valid_time["t_end"] = valid_until_ms
        payload: dict[str, Any] = {
            "schema_version": 2,
            "purpose_ref": self.purpose_ref,
            "valid_time": valid_time,
            "components": components,
            "primary_component_id": "main",
            "primary_event": {"at": at, "type_ref": event_type, "citation_id": "src"},
            "citations": [
                {
                    "citation_id": "src",
                    "source_ref": source,
                    "locator": {"scheme": scheme, "value": where},
                    "content_digest": _sha256(text if source_content is None else source_content),
                }
            ],
        }
        if family_refs:
            payload["reconciliation"] = {"family_refs": sorted(set(family_refs))}
        evidence = {"evidence_ref": source, "evidence_digest": _sha256(text), "citation_ids": ["src"]}
        return {"idempotency_key": _new_key("capture"), "payload": payload, "evidence": evidence}

    # -- reading -----------------------------------------------------------------------------------
    async def search(self, query: str, *, limit: int = 10) -> list[Memory]:
        """The current memories that best match `query`, best first (one page)."""
        value = await self._value(SEARCH, {"query": query, "purpose_ref": self.purpose_ref, "limit": limit})
        return [_memory(packet["record"], packet.get("score")) for packet in value["records"]]

    async def get(self, record_id: str) -> Memory | None:
        """The current record `record_id`, or None when it is unknown, out of scope or no longer current."""
        try:
            value = await self._value(GET, {"record_id": record_id, "purpose_ref": self.purpose_ref})
        except EngramError as error:
            if error.code == "NOT_FOUND":
                return None
            raise
        return _memory(value["record"], None)

    async def _value(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        result = await self._session.call_tool(tool, arguments)
        envelope = _envelope(result)
        if not envelope.get("ok"):
            error = envelope.get("error") or {}
            fault = (getattr(result, "meta", None) or {}).get(FAULT_META_KEY) or {}
            raise EngramError(
                str(error.get("code", "UNKNOWN")),
                str(error.get("message", "")),
                bool(error.get("retriable", False)),
                fault.get("pointer") if isinstance(fault, Mapping) else None,
                confirmation_request_id=error.get("confirmation_request_id"),
                for_the_person=error.get("for_the_person"),
            )
        value: dict[str, Any] = envelope["output"]["value"]
        return value


def _envelope(result: Any) -> dict[str, Any]:
    structured = getattr(result, "structured_content", None)
    if isinstance(structured, dict):
        return structured
    for block in getattr(result, "content", []):
        if getattr(block, "type", None) == "text":
            parsed = json.loads(block.text)
            if isinstance(parsed, dict):
                return parsed
    raise EngramError("UNEXPECTED_ANSWER", "the server's answer carries no envelope", False)


def _memory(record: Mapping[str, Any], score: object) -> Memory:
    primary = record["primary_component_id"]
    texts = [c["text"] for c in record["components"] if c["component_id"] == primary] or [
        c["text"] for c in record["components"]
    ]
    citations = record.get("citations") or [{}]
    return Memory(
        record_id=str(record["record_id"]),
        text=texts[0],
        source_ref=str(citations[0].get("source_ref", "")),
        score=float(score) if isinstance(score, (int, float)) else None,
    )
