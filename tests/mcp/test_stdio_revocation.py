"""SPEC §2 and §14: `engram-memory revoke TOKEN_ID` stops a binding on a server that is already running.

The token id comes from `bind --json`; the revoked binding's calls answer the AUTHORIZATION_REVOKED envelope
(not a protocol error) on every tool, while another binding to the same scope keeps working. The home is
this module's own, so no other test's server shares the revocation.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from engram_memory.host.settings import HostPaths
from tests.mcp.helpers import (
    ALL_TOOL_NAMES,
    HostCli,
    assert_failure,
    capture,
    found_ids,
    remember,
    sample_args,
    search,
    unique_word,
)
from tests.support.agents import StdioAgent, refusal_message
from tests.support.payloads import PURPOSE

pytestmark = pytest.mark.stdio


def _bind(host: HostCli, principal: str, session: str) -> dict[str, Any]:
    done = host.run(
        "bind", "--tenant", "tenant-a", "--workspace", "workspace-1", "--principal", principal,
        "--agent", "agent-1", "--session", session, "--purpose", PURPOSE, "--all-tools", "--json",
    )  # fmt: skip
    issued: dict[str, Any] = json.loads(done.stdout)
    return issued


def test_running_server_answers_revoked_after_revoke_while_another_binding_works(paths: HostPaths) -> None:
    host = HostCli(paths)
    alice, bob = _bind(host, "alice", "session-1"), _bind(host, "bob", "session-2")
    word = unique_word("revocation")
    with StdioAgent(paths.home, alice["token"]) as revoked, StdioAgent(paths.home, bob["token"]) as other:
        _, record_id = remember(revoked, f"The {word} service is owned by the platform team.")
        assert found_ids(revoked, word) == [record_id]

        said = json.loads(host.run("revoke", alice["token_id"], "--json").stdout)
        assert said["token_id"] == alice["token_id"] and said["already_revoked"] is False

        for tool in ALL_TOOL_NAMES:
            assert_failure(revoked.call(tool, sample_args(tool)), "AUTHORIZATION_REVOKED")
        assert_failure(search(revoked, word), "AUTHORIZATION_REVOKED")
        # The same scope through another binding: reads and writes go on.
        assert found_ids(other, word) == [record_id]
        capture(other, f"Bob notes that {word} pages the platform rota.")

    # A server started later with the revoked token refuses the connection, naming the revocation.
    message = refusal_message(lambda: StdioAgent(paths.home, alice["token"]))
    assert message == f"Trusted invocation context unavailable: binding {alice['token_id']} is revoked"

    entries = [json.loads(line) for line in host.run("audit", "export").stdout.splitlines()]
    refused = [entry for entry in entries if entry["outcome"] == "AUTHORIZATION_REVOKED"]
    assert len(refused) == len(ALL_TOOL_NAMES) + 1
    assert {entry["token_id"] for entry in refused} == {alice["token_id"]}
    assert all(entry["outcome"] == "ok" for entry in entries if entry["token_id"] == bob["token_id"])
    stats = json.loads(host.run("stats", "--json").stdout)
    assert stats["revoked_bindings"] == 1
