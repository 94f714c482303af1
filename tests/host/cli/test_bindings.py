"""`bind`, `bindings list` and `revoke` as the host uses them: every binding it signs is on file (claims,
never the token), its id is printed, a grantless binding is warned about, and an id it never issued
cannot be revoked by a typo."""

from __future__ import annotations

import json
import stat
import time
from pathlib import Path
from typing import Any

import pytest
from mcp.shared.exceptions import MCPError

from engram_memory.contract.instants import parse_instant
from engram_memory.host.bindings import issued_row_of, verify_binding
from engram_memory.host.compose import current_user
from engram_memory.host.keys.files import load_signing_key
from engram_memory.host.settings import HostPaths
from tests.host.clirun import Done, LoggedAgent, assert_one_line_failure, cli, refused_connection
from tests.support.agents import StdioAgent
from tests.support.homes import Issued, bind, engine_for, make_home
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


UNAVAILABLE = "Trusted invocation context unavailable: "


@pytest.mark.stdio
def test_a_server_without_a_usable_binding_refuses_the_connection_and_says_why(
    sqlite_paths: HostPaths, tmp_path: Path
) -> None:
    log = tmp_path / "serve.stderr"
    assert refused_connection(sqlite_paths.home, log) == (
        UNAVAILABLE + "no binding given (--binding, --binding-file or ENGRAM_BINDING)"
    )
    assert log.read_text(encoding="utf-8").splitlines()[0] == (
        "engram-memory: WARNING no binding given (--binding, --binding-file or ENGRAM_BINDING): clients are refused"
        " at connection until the host gives a usable binding"
    )
    garbage = refused_connection(sqlite_paths.home, log, env={"ENGRAM_BINDING": "not-a-token"})
    assert garbage == UNAVAILABLE + "the binding token does not verify against this host's key"
    token = bind(sqlite_paths).token
    with LoggedAgent(sqlite_paths.home, log, env={"ENGRAM_BINDING": token}) as agent:
        assert len(agent.list_tools()) == 6


@pytest.mark.stdio
def test_a_grantless_binding_connects_and_lists_no_tools(sqlite_paths: HostPaths) -> None:
    with StdioAgent(sqlite_paths.home, bind(sqlite_paths, grants=frozenset()).token) as agent:
        assert agent.list_tools() == []


@pytest.mark.stdio
def test_an_expired_or_revoked_binding_is_refused_at_connection_with_its_id(
    sqlite_paths: HostPaths, tmp_path: Path
) -> None:
    expired = bind(sqlite_paths, lifetime_s=60, now_s=int(time.time()) - 3_600)
    log = tmp_path / "expired.stderr"
    message = refused_connection(sqlite_paths.home, log, env={"ENGRAM_BINDING": expired.token})
    assert message.startswith(UNAVAILABLE + f"binding {expired.binding.token_id} expired at ")
    line = log.read_text(encoding="utf-8").splitlines()[0]
    assert line.startswith(f"engram-memory: WARNING binding {expired.binding.token_id} expired at ")
    revoked = bind(sqlite_paths)
    _ok(cli("revoke", revoked.binding.token_id, "--unlisted", "--home", sqlite_paths.home))
    message = refused_connection(sqlite_paths.home, log, env={"ENGRAM_BINDING": revoked.token})
    assert message == UNAVAILABLE + f"binding {revoked.binding.token_id} is revoked"
    for part in revoked.token.split("."):
        assert part not in message
        assert part not in log.read_text(encoding="utf-8")


@pytest.mark.stdio
def test_serve_reads_its_binding_from_a_file(sqlite_paths: HostPaths, tmp_path: Path) -> None:
    issued = bind(sqlite_paths)
    token_file = tmp_path / "binding.jwt"
    token_file.write_text(issued.token + "\n", encoding="utf-8")
    log = tmp_path / "serve.stderr"
    with LoggedAgent(sqlite_paths.home, log, "--binding-file", str(token_file)) as agent:
        assert len(agent.list_tools()) == 6
    assert log.read_text(encoding="utf-8").splitlines() == [
        f"engram-memory: INFO serving over stdio; binding {issued.binding.token_id} verified (from {token_file},"
        " read again when it changes)"
    ]
    with LoggedAgent(sqlite_paths.home, log, env={"ENGRAM_BINDING_FILE": str(token_file)}) as agent:
        assert len(agent.list_tools()) == 6


@pytest.mark.stdio
def test_a_renewed_binding_file_takes_effect_without_a_restart(sqlite_paths: HostPaths, tmp_path: Path) -> None:
    first = bind(sqlite_paths)
    token_file = tmp_path / "binding.jwt"
    token_file.write_text(first.token, encoding="utf-8")
    search = {"query": "deploys", "purpose_ref": PURPOSE}
    with LoggedAgent(sqlite_paths.home, tmp_path / "serve.stderr", "--binding-file", str(token_file)) as agent:
        assert agent.call("engram_memory_search", search)["ok"]
        _ok(cli("revoke", first.binding.token_id, "--unlisted", "--home", sqlite_paths.home))
        assert agent.error_code("engram_memory_search", search) == "AUTHORIZATION_REVOKED"
        second = bind(sqlite_paths)
        replacement = tmp_path / "binding.jwt.new"
        replacement.write_text(second.token, encoding="utf-8")
        replacement.replace(token_file)
        assert agent.call("engram_memory_search", search)["ok"]
        token_file.write_text("garbage", encoding="utf-8")
        with pytest.raises(MCPError) as raised:
            agent.raw_call("engram_memory_search", search)
        assert (raised.value.code, raised.value.message) == (-32603, "Trusted invocation context unavailable")


def test_serve_refuses_a_binding_file_it_cannot_use_in_one_line(sqlite_paths: HostPaths, tmp_path: Path) -> None:
    missing = assert_one_line_failure(cli("serve", "--binding-file", tmp_path / "nope", "--home", sqlite_paths.home))
    assert missing.startswith(ERROR + f"cannot read the binding file {tmp_path / 'nope'}: No such file")
    empty = tmp_path / "empty"
    empty.write_text("\n", encoding="utf-8")
    line = assert_one_line_failure(cli("serve", "--binding-file", empty, "--home", sqlite_paths.home))
    assert line == ERROR + f"the binding file {empty} is empty"
    both = assert_one_line_failure(cli("serve", "--binding", "x", "--binding-file", empty, "--home", sqlite_paths.home))
    assert both == ERROR + "give the binding once: --binding or --binding-file, not both"


# -- a binding file the host keeps current -----------------------------------------------------------


def _recorded(paths: HostPaths, *, lifetime_s: int, age_s: int) -> Issued:
    """A binding issued `age_s` ago and on file, as `bind` would have left it."""
    issued = bind(paths, lifetime_s=lifetime_s, now_s=int(time.time()) - age_s)
    with engine_for(paths) as engine:
        engine.record_binding(issued_row_of(issued.binding, issued_by="host:test"))
    return issued


def test_bind_to_a_file_writes_it_for_the_owner_only_and_never_prints_the_token(
    paths: HostPaths, tmp_path: Path
) -> None:
    target = tmp_path / "agent.binding"
    done = _bind(paths, "--all-tools", "--to-file", str(target), json_out=False)
    assert _ok(done) == ""
    token = target.read_text(encoding="utf-8").strip()
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    (listed,) = _listed(paths)
    assert f"token id {listed['token_id']}" in done.stderr and f"written to {target}" in done.stderr
    assert token not in done.stderr
    said = json.loads(_ok(_bind(paths, "--to-file", str(target))))
    assert said["file"] == str(target) and "token" not in said
    refused = assert_one_line_failure(
        _bind(paths, "--to-file", str(target), "--print-config", "claude-code", json_out=False)
    )
    assert refused == ERROR + "--to-file and --print-config both say where the token goes: choose one"


def test_renew_replaces_a_due_binding_file_with_the_same_claims(paths: HostPaths, tmp_path: Path) -> None:
    old = _recorded(paths, lifetime_s=3600, age_s=3300)  # 300 s left of 3600: due
    target = tmp_path / "agent.binding"
    target.write_text(old.token, encoding="utf-8")
    said = json.loads(_ok(cli("bindings", "renew", target, "--json", "--home", paths.home)))
    assert said["renewed"] is True and said["previous"] == old.binding.token_id
    new = verify_binding(load_signing_key(paths).public_key(), target.read_text(encoding="utf-8").strip())
    assert new.token_id == said["token_id"] != old.binding.token_id
    same = ("tenant", "workspace", "principal", "agent_id", "session", "purpose_ref", "grants", "confirm_mutations")
    assert all(getattr(new, name) == getattr(old.binding, name) for name in same)
    assert new.expires_at_ms - new.issued_at_ms == 3_600_000
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    listed = {item["token_id"]: item for item in _listed(paths)}
    assert listed[new.token_id]["status"] == "active" and listed[old.binding.token_id]["status"] == "expiring"
    again = _ok(cli("bindings", "renew", target, "--home", paths.home))
    assert again.startswith(f"not due: binding {new.token_id} expires ")
    forced = _ok(cli("bindings", "renew", target, "--force", "--home", paths.home))
    assert forced.startswith(f"renewed: binding {new.token_id} -> bind_")


def test_renew_takes_an_expired_binding_but_never_a_revoked_or_foreign_one(paths: HostPaths, tmp_path: Path) -> None:
    target = tmp_path / "agent.binding"
    target.write_text(_recorded(paths, lifetime_s=60, age_s=3600).token, encoding="utf-8")
    assert _ok(cli("bindings", "renew", target, "--home", paths.home)).startswith("renewed: ")
    revoked = _recorded(paths, lifetime_s=3600, age_s=3500)
    _ok(cli("revoke", revoked.binding.token_id, "--home", paths.home))
    target.write_text(revoked.token, encoding="utf-8")
    line = assert_one_line_failure(cli("bindings", "renew", target, "--home", paths.home))
    assert (
        line
        == ERROR
        + f"binding {revoked.binding.token_id} is revoked: it is not renewed (engram-memory bind issues a new one)"
    )
    assert target.read_text(encoding="utf-8") == revoked.token
    foreign = bind(make_home(tmp_path / "other")).token
    target.write_text(foreign, encoding="utf-8")
    line = assert_one_line_failure(cli("bindings", "renew", target, "--home", paths.home))
    assert "does not verify against this host's key" in line and foreign.split(".")[2] not in line
    target.write_text("", encoding="utf-8")
    line = assert_one_line_failure(cli("bindings", "renew", target, "--home", paths.home))
    assert line == ERROR + f"the binding file {target} is empty"
    line = assert_one_line_failure(cli("bindings", "renew", tmp_path / "missing", "--home", paths.home))
    assert line.startswith(ERROR + f"cannot read the binding file {tmp_path / 'missing'}")


def test_bindings_list_marks_a_binding_expiring_when_a_fifth_or_a_day_is_left(paths: HostPaths) -> None:
    fresh = _recorded(paths, lifetime_s=3600, age_s=60)
    late = _recorded(paths, lifetime_s=3600, age_s=3000)  # 600 s of 3600 left: under a fifth
    week = _recorded(paths, lifetime_s=7 * 86_400, age_s=5 * 86_400)  # two days left: a fifth, but over a day
    listed = {item["token_id"]: item["status"] for item in _listed(paths)}
    assert listed[fresh.binding.token_id] == "active"
    assert listed[late.binding.token_id] == "expiring"
    assert listed[week.binding.token_id] == "active"
