"""`bind`, `bindings list` and `revoke` as the host uses them: every binding it signs is on file (claims,
never the token), its id is printed, a grantless binding is warned about, and an id it never issued
cannot be revoked by a typo."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from engram_memory.contract.instants import parse_instant
from engram_memory.host.compose import current_user
from engram_memory.host.settings import HostPaths
from tests.host.clirun import Done, assert_one_line_failure, cli
from tests.support.homes import bind
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
