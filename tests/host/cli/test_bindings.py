"""`bind`, `bindings list` and `revoke` as the host uses them: every binding it signs is on file (claims,
never the token), its id is printed, a grantless binding is warned about, and an id it never issued
cannot be revoked by a typo."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from engram_memory.contract.instants import parse_instant
from engram_memory.host.compose import current_user
from engram_memory.host.settings import HostPaths
from tests.host.clirun import Done, LoggedAgent, assert_one_line_failure, cli
from tests.support.agents import StdioAgent
from tests.support.homes import bind
from tests.support.payloads import PURPOSE
from tests.support.raw import raw_vault

ERROR = "engram-memory: error: "
BINDING_KEYS = {
    "token_id",
    "status",
    "tenant",
    "workspace",
    "principal",
    "agent_id",
    "session",
    "purpose_ref",
    "grants",
    "confirm_mutations",
    "trust_class",
    "issued_at",
    "issued_by",
    "expires_at",
    "revoked_at",
    "revoked_by",
}


def _ok(done: Done) -> str:
    assert "Traceback" not in done.stderr, done.stderr
    assert done.code == 0, done
    return done.stdout


def _bind(paths: HostPaths, *extra: str, principal: str = "alice", json_out: bool = True) -> Done:
    args = [
        "bind", "--tenant", "acme", "--workspace", "platform", "--principal", principal, "--agent", "claude-code",
        "--session", "s-1", "--purpose", "purpose:notes", *extra, "--home", str(paths.home),
    ]  # fmt: skip
    return cli(*args, *(["--json"] if json_out else []))


def _listed(paths: HostPaths, *extra: str) -> list[dict[str, Any]]:
    listed: list[dict[str, Any]] = json.loads(_ok(cli("bindings", "list", "--json", *extra, "--home", paths.home)))
    return listed


def test_bind_prints_the_token_and_its_id_and_keeps_the_claims_never_the_token(paths: HostPaths) -> None:
    done = _bind(paths, "--grant", "search", json_out=False)
    token = _ok(done).strip()
    (listed,) = _listed(paths)
    assert set(listed) == BINDING_KEYS
    token_id = listed["token_id"]
    assert done.stderr.startswith(f"engram-memory: token id {token_id} (revoke with: engram-memory revoke {token_id})")
    assert (listed["status"], listed["tenant"], listed["workspace"], listed["principal"]) == (
        "active",
        "acme",
        "platform",
        "alice",
    )
    assert listed["grants"] == ["engram_memory_search"] and listed["issued_by"] == current_user()
    assert parse_instant(listed["issued_at"]) is not None and parse_instant(listed["expires_at"]) is not None
    assert listed["revoked_at"] is None
    with raw_vault(paths) as db:
        assert db.count("issued_bindings") == 1
    assert token not in json.dumps(_listed(paths))
    assert token.split(".")[2] not in _ok(cli("bindings", "list", "--home", paths.home))


def test_bindings_list_shows_revocation_and_newest_first_with_a_limit(paths: HostPaths) -> None:
    first = json.loads(_ok(_bind(paths, "--all-tools", principal="alice")))["token_id"]
    second = json.loads(_ok(_bind(paths, "--all-tools", principal="bob")))["token_id"]
    _ok(cli("revoke", first, "--home", paths.home))
    listed = _listed(paths)
    assert {item["token_id"] for item in listed} == {first, second}
    revoked = next(item for item in listed if item["token_id"] == first)
    assert revoked["status"] == "revoked" and revoked["revoked_by"] == current_user()
    cut = cli("bindings", "list", "--limit", "1", "--json", "--home", paths.home)
    assert len(json.loads(_ok(cut))) == 1
    assert (
        cut.stderr
        == "engram-memory: showing the first 1 bindings (newest first); more exist (raise --limit to see them)\n"
    )
    people = _ok(cli("bindings", "list", "--home", paths.home))
    assert first in people and second in people and "revoked" in people and "active" in people


def test_a_binding_without_tools_is_issued_with_a_warning(paths: HostPaths) -> None:
    done = _bind(paths)
    assert json.loads(_ok(done))["grants"] == []
    assert done.stderr == (
        "engram-memory: warning: the binding grants no tool: the agent will see no memory tools"
        " (add --grant TOOL or --all-tools)\n"
    )
    assert _bind(paths, "--grant", "get").stderr == ""


def test_revoking_an_id_this_home_never_issued_is_an_error_and_writes_nothing(paths: HostPaths) -> None:
    line = assert_one_line_failure(cli("revoke", "bind_aaaaaaaaaaaaaaaa", "--home", paths.home))
    assert line.startswith(ERROR + "this home issued no binding bind_aaaaaaaaaaaaaaaa (see `engram-memory bindings")
    with raw_vault(paths) as db:
        assert db.count("revocations") == 0


def test_an_unlisted_token_is_revoked_with_unlisted_and_then_known(paths: HostPaths, tmp_path: Path) -> None:
    token_id = bind(paths).binding.token_id  # signed with the key alone, as an older version did
    assert_one_line_failure(cli("revoke", token_id, "--home", paths.home))
    said = json.loads(_ok(cli("revoke", token_id, "--unlisted", "--json", "--home", paths.home)))
    assert said["token_id"] == token_id and said["already_revoked"] is False
    again = json.loads(_ok(cli("revoke", token_id, "--json", "--home", paths.home)))  # known now: revoked
    assert again["already_revoked"] is True


# -- serve: what a binding that cannot work says ---------------------------------------------------


@pytest.mark.stdio
def test_an_unbound_server_says_why_in_its_instructions(sqlite_paths: HostPaths) -> None:
    with StdioAgent(sqlite_paths.home, None) as agent:
        assert agent.list_tools() == []
        assert agent.instructions is not None
        assert agent.instructions.endswith(
            "Memory tools are off on this server (no binding given (--binding or ENGRAM_BINDING)): tell the user"
            " the host must start it with a valid binding."
        )
    with StdioAgent(sqlite_paths.home, "not-a-token") as agent:
        assert agent.instructions is not None and "Memory tools are off on this server" in agent.instructions
    token = bind(sqlite_paths).token
    with StdioAgent(sqlite_paths.home, token) as agent:
        assert agent.instructions is not None and "Memory tools are off" not in agent.instructions


@pytest.mark.stdio
def test_serve_names_an_expired_or_revoked_binding_instead_of_verified(sqlite_paths: HostPaths, tmp_path: Path) -> None:
    expired = bind(sqlite_paths, lifetime_s=60, now_s=int(time.time()) - 3_600)
    log = tmp_path / "expired.stderr"
    with LoggedAgent(sqlite_paths.home, log, env={"ENGRAM_BINDING": expired.token}) as agent:
        assert agent.error_code("engram_memory_search", {"query": "x", "purpose_ref": PURPOSE}) == (
            "AUTHORIZATION_EXPIRED"
        )
    (line,) = log.read_text(encoding="utf-8").splitlines()
    assert line.startswith(f"engram-memory: WARNING binding {expired.binding.token_id} expired at ")
    assert line.endswith(": every call answers AUTHORIZATION_EXPIRED")
    revoked = bind(sqlite_paths)
    _ok(cli("revoke", revoked.binding.token_id, "--unlisted", "--home", sqlite_paths.home))
    log = tmp_path / "revoked.stderr"
    with LoggedAgent(sqlite_paths.home, log, env={"ENGRAM_BINDING": revoked.token}):
        pass
    assert log.read_text(encoding="utf-8").splitlines() == [
        f"engram-memory: WARNING binding {revoked.binding.token_id} is revoked: every call answers"
        " AUTHORIZATION_REVOKED"
    ]


@pytest.mark.stdio
def test_serve_reads_its_binding_from_a_file(sqlite_paths: HostPaths, tmp_path: Path) -> None:
    issued = bind(sqlite_paths)
    token_file = tmp_path / "binding.jwt"
    token_file.write_text(issued.token + "\n", encoding="utf-8")
    log = tmp_path / "serve.stderr"
    with LoggedAgent(sqlite_paths.home, log, "--binding-file", str(token_file)) as agent:
        assert len(agent.list_tools()) == 6
    assert log.read_text(encoding="utf-8").splitlines() == [
        f"engram-memory: INFO serving over stdio; binding {issued.binding.token_id} verified"
    ]
    with LoggedAgent(sqlite_paths.home, log, env={"ENGRAM_BINDING_FILE": str(token_file)}) as agent:
        assert len(agent.list_tools()) == 6


def test_serve_refuses_a_binding_file_it_cannot_use_in_one_line(sqlite_paths: HostPaths, tmp_path: Path) -> None:
    missing = assert_one_line_failure(cli("serve", "--binding-file", tmp_path / "nope", "--home", sqlite_paths.home))
    assert missing.startswith(ERROR + f"cannot read the binding file {tmp_path / 'nope'}: No such file")
    empty = tmp_path / "empty"
    empty.write_text("\n", encoding="utf-8")
    line = assert_one_line_failure(cli("serve", "--binding-file", empty, "--home", sqlite_paths.home))
    assert line == ERROR + f"the binding file {empty} is empty"
    both = assert_one_line_failure(cli("serve", "--binding", "x", "--binding-file", empty, "--home", sqlite_paths.home))
    assert both == ERROR + "give the binding once: --binding or --binding-file, not both"
