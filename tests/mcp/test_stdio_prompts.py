"""The agent guide as an MCP prompt, in the four languages the server searches."""

from __future__ import annotations

import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

from engram_memory.mcp.guide import GUIDE_PROMPT, LANGUAGES
from tests.support.agents import McpAgent


def test_the_guide_is_listed(alice_modern: McpAgent) -> None:
    [prompt] = alice_modern.list_prompts()
    assert prompt.name == GUIDE_PROMPT
    assert [argument.name for argument in prompt.arguments or []] == ["language"]


@pytest.mark.parametrize("language", [None, *LANGUAGES])
def test_the_guide_says_search_first_admission_approval_and_no_secrets(
    alice_modern: McpAgent, language: str | None
) -> None:
    result = alice_modern.get_prompt(GUIDE_PROMPT, None if language is None else {"language": language})
    [message] = result.messages
    assert message.role == "user" and isinstance(message.content, types.TextContent)
    text = message.content.text
    for word in (
        "engram_memory_request_admission",
        "gate_failed",
        "idempotency_key",
        ".env",
        "record_id",
        "family_refs",
        "superseded_record_ids",
    ):
        assert word in text, (language, word)
    assert text.count("\n") == 7  # a title and seven rules in every language


@pytest.mark.parametrize(("name", "arguments"), [("memory_guide", {"language": "fr"}), ("other", None)])
def test_an_unknown_prompt_or_language_is_invalid_params(
    alice_modern: McpAgent, name: str, arguments: dict[str, str] | None
) -> None:
    with pytest.raises(MCPError) as refused:
        alice_modern.get_prompt(name, arguments)
    assert refused.value.error.code == types.INVALID_PARAMS
