"""A refused call says which field failed, beside the closed envelope: the MCP result's `_meta`."""

from __future__ import annotations

import json

from engram_memory.contract.errors import MESSAGES, ErrorCode
from engram_memory.mcp.server import FAULT_META_KEY
from tests.mcp.helpers import CAPTURE, SEARCH
from tests.support.agents import McpAgent
from tests.support.payloads import PURPOSE, capture_args, with_change


def test_a_capture_missing_a_field_is_told_where_and_the_envelope_stays_closed(alice_modern: McpAgent) -> None:
    result = alice_modern.raw_call(CAPTURE, with_change(capture_args("Missing citations."), "payload/citations", ...))
    assert result.is_error
    envelope = json.loads(result.content[0].text)  # type: ignore[union-attr]
    assert set(envelope) == {"ok", "auditId", "redactionClass", "error"}
    assert envelope["error"]["message"] == (
        MESSAGES[ErrorCode.INVALID_SCHEMA] + " At /payload/citations: required, missing: a list of 1 to 256 items."
    )
    assert (result.meta or {})[FAULT_META_KEY] == {"pointer": "/payload/citations", "rule": "required"}


def test_a_wrong_digest_is_placed_and_an_answered_call_carries_no_fault(alice_modern: McpAgent) -> None:
    bad = with_change(capture_args("Bad digest."), "payload/citations/0/content_digest", "sha256:ABC")
    result = alice_modern.raw_call(CAPTURE, bad)
    assert json.loads(result.content[0].text)["error"]["code"] == "INVALID_DIGEST"  # type: ignore[union-attr]
    assert (result.meta or {})[FAULT_META_KEY] == {"pointer": "/payload/citations/0/content_digest", "rule": "pattern"}
    answered = alice_modern.raw_call(SEARCH, {"query": "anything", "purpose_ref": PURPOSE})
    assert not answered.is_error and not (answered.meta or {}).get(FAULT_META_KEY)
