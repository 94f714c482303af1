"""The `engram-memory` command, driven as the host drives it: a real process per command.

Every failure must exit non-zero with exactly one line on stderr and never a Python traceback.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import stat
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from mcp.shared.exceptions import MCPError

from engram_memory.contract.instants import parse_instant
from engram_memory.contract.tools import ALL_TOOLS, Tool
from engram_memory.engine.refusals import Refusal
from engram_memory.host.bindings import BindingError, verify_binding
from engram_memory.host.compose import current_user
from engram_memory.host.keys.files import load_signing_key
from engram_memory.host.policy_file import DEFAULT_POLICY_TOML
from engram_memory.host.settings import HostPaths
from tests.host.clirun import Done, LoggedAgent, assert_one_line_failure, cli, cli_process, refused_connection
from tests.support.agents import StdioAgent
from tests.support.clocks import ManualClock
from tests.support.engines import steered_engine
from tests.support.homes import bind, engine_for, make_home
from tests.support.payloads import PURPOSE, capture_args, unique_key

JWT = re.compile(r"^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$")
ALL_NAMES = sorted(tool.value for tool in ALL_TOOLS)
ERROR = "engram-memory: error: "
BIND_ARGS = (
    "--tenant", "acme",
    "--workspace", "platform",
    "--principal", "alice@acme",
    "--agent", "claude-code",
    "--session", "s-1",
    "--purpose", PURPOSE,
)  # fmt: skip
_RULES = itertools.count(1)
NO_BINDING = "no binding given (--binding, --binding-file or ENGRAM_BINDING)"
REFUSED = ": clients are refused at connection until the host gives a usable binding"
NO_BINDING_WARNING = f"engram-memory: WARNING {NO_BINDING}{REFUSED}"
BAD_BINDING_WARNING = f"engram-memory: WARNING the binding token does not verify against this host's key{REFUSED}"


def _home_files(paths: HostPaths) -> list[Path]:
    return [paths.config, paths.policy, paths.kek_file, paths.secret_file, paths.signing_key_file, paths.recovery_file]


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _ok(done: Done) -> str:
    assert "Traceback" not in done.stderr, done.stderr
    assert done.code == 0, done
    return done.stdout


def _cli_init(home: Path) -> HostPaths:
    _ok(cli("init", "--home", home))
    return HostPaths(home=home)


def _init(home: Path) -> HostPaths:
    """A home made in-process, exactly as `init` makes it (the init tests drive the command itself)."""
    return make_home(home)


def _bind_json(home: Path, *extra: str) -> dict[str, Any]:
    out = _ok(cli("bind", *BIND_ARGS, *extra, "--home", home, "--json"))
    data: dict[str, Any] = json.loads(out)
    return data


@dataclass(frozen=True)
class ForgetRequest:
    confirmation_id: str
    record_id: str
    forget_args: dict[str, Any]


def _forget_request(paths: HostPaths) -> ForgetRequest:
    """An agent captures, admits, then tries to forget: the gate refuses and leaves a request for the host."""
    binding = bind(paths).binding
    with engine_for(paths) as engine:
        text = f"Deploys roll back by switching the router; runbook rule number {next(_RULES)}."
        captured = engine.handle(binding, Tool.CAPTURE, capture_args(text))
        assert captured["ok"], captured
        candidate_id = captured["output"]["value"]["candidate_id"]
        admitted = engine.handle(
            binding, Tool.REQUEST_ADMISSION, {"candidate_id": candidate_id, "idempotency_key": unique_key("admit")}
        )
        assert admitted["ok"], admitted
        record_id = admitted["output"]["value"]["outcome"]["record_id"]
        forget_args = {"record_id": record_id, "idempotency_key": unique_key("forget"), "reason_ref": "ticket:OPS-1"}
        refused = engine.handle(binding, Tool.FORGET, forget_args)
        assert refused["error"]["code"] == "gate_failed", refused
        [row] = [row for row, status in engine.confirmations() if row.target == record_id and status == "requested"]
    return ForgetRequest(row.confirmation_id, record_id, forget_args)


def _list_json(home: Path, *extra: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = json.loads(_ok(cli("confirmations", "list", *extra, "--json", "--home", home)))
    return items


# -- init ----------------------------------------------------------------------------------------


@pytest.mark.process
def test_init_creates_config_policy_keys_and_store_when_home_is_new(tmp_path: Path) -> None:
    home = tmp_path / "a-home-folder-with-a-rather-long-name-so-output-lines-exceed-eighty-columns"
    paths = HostPaths(home=home)
    done = cli_process("init", "--home", home)
    assert _ok(done).splitlines() == [
        f"home: {home}",
        "store: sqlite",
        *(f"created {path}" for path in [*_home_files(paths), paths.sqlite_file, paths.vault_file]),
    ]
    assert done.stderr == (  # said once, when the key is made
        "engram-memory: made this home's recovery key (keys/recovery.key). Run 'engram-memory recovery-key"
        " export' and keep it offline: with it and a backup archive, this home restores on another machine.\n"
    )
    assert tomllib.loads(paths.config.read_text(encoding="utf-8")) == {"store": "sqlite"}
    assert paths.policy.read_text(encoding="utf-8") == DEFAULT_POLICY_TOML
    key_files = (paths.kek_file, paths.secret_file, paths.signing_key_file, paths.recovery_file, paths.vault_file)
    for key_file in (*key_files, paths.sqlite_file):
        assert _mode(key_file) == 0o600, key_file
    assert _mode(paths.keys_dir) == 0o700
    assert _mode(home) == 0o700
    assert paths.sqlite_file.is_file()
    assert paths.sqlite_file.stat().st_size > 0


def test_init_changes_nothing_when_run_twice(tmp_path: Path) -> None:
    home = tmp_path / "home"
    paths = _cli_init(home)
    before = {path: path.read_bytes() for path in _home_files(paths)}
    done = cli("init", "--home", home)
    assert _ok(done) == (
        f"home: {home}\nstore: sqlite\nnothing to do: the home is complete (keys are never overwritten)\n"
    )
    assert "recovery key" not in done.stderr
    assert {path: path.read_bytes() for path in _home_files(paths)} == before
    assert sorted(p.name for p in paths.keys_dir.iterdir()) == [
        "host-signing.pem",
        "kek.json",
        "recovery.key",
        "secret.key",
        "vault.db",
    ]


def test_init_keeps_keys_when_run_again_with_explicit_sqlite_store(tmp_path: Path) -> None:
    home = tmp_path / "home"
    paths = _cli_init(home)
    before = {path: path.read_bytes() for path in _home_files(paths)}
    assert "nothing to do" in _ok(cli("init", "--store", "sqlite", "--home", home))
    assert {path: path.read_bytes() for path in _home_files(paths)} == before


def test_init_json_lists_created_files_then_nothing(tmp_path: Path) -> None:
    home = tmp_path / "home"
    paths = HostPaths(home=home)
    first = json.loads(_ok(cli("init", "--json", "--home", home)))
    assert first == {
        "home": str(home),
        "store": "sqlite",
        "created": [str(p) for p in [*_home_files(paths), paths.sqlite_file, paths.vault_file]],
    }
    second = json.loads(_ok(cli("init", "--home", home, "--json")))
    assert second == {"home": str(home), "store": "sqlite", "created": []}


def test_init_refuses_an_unreachable_postgresql_store_when_home_is_new(tmp_path: Path) -> None:
    home = tmp_path / "home"
    line = assert_one_line_failure(cli("init", "--store", "postgresql://x", "--home", home))
    assert line.startswith(ERROR + "the PostgreSQL server could not be reached as the owner")
    assert not home.exists()


def test_init_refuses_postgresql_store_when_home_exists(tmp_path: Path) -> None:
    home = tmp_path / "home"
    paths = _cli_init(home)
    before = {path: path.read_bytes() for path in _home_files(paths)}
    line = assert_one_line_failure(cli("init", "--store", "postgresql://user@db/engram", "--home", home))
    assert line.startswith(ERROR)
    assert "sqlite" in line
    assert {path: path.read_bytes() for path in _home_files(paths)} == before


def test_init_fails_with_one_line_when_home_is_under_a_file(tmp_path: Path) -> None:
    blocker = tmp_path / "plain-file"
    blocker.write_text("not a folder", encoding="utf-8")
    line = assert_one_line_failure(cli("init", "--home", blocker / "home"))
    assert line.startswith(ERROR)


def test_init_uses_engram_home_when_no_flag_is_given(tmp_path: Path) -> None:
    home = tmp_path / "from-env"
    out = _ok(cli("init", env={"ENGRAM_HOME": str(home)}))
    assert out.splitlines()[0] == f"home: {home}"
    assert HostPaths(home=home).signing_key_file.is_file()


def test_init_uses_default_home_when_neither_flag_nor_environment_is_given(tmp_path: Path) -> None:
    user_home = tmp_path / "user"
    user_home.mkdir()
    out = _ok(cli("init", env={"HOME": str(user_home)}, cwd=tmp_path))
    default = user_home / ".local" / "share" / "engram-memory"
    assert out.splitlines()[0] == f"home: {default}"
    assert HostPaths(home=default).kek_file.is_file()
    assert _list_json(default) == []


# -- --home, ENGRAM_HOME and broken homes --------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        ("confirmations", "list"),
        ("confirmations", "list", "--json"),
        ("confirmations", "approve", "conf_aaaaaaaaaaaaaaaa"),
        ("confirmations", "deny", "conf_aaaaaaaaaaaaaaaa"),
        ("bind", *BIND_ARGS),
        ("serve",),
    ],
    ids=["list", "list-json", "approve", "deny", "bind", "serve"],
)
@pytest.mark.process
def test_host_command_fails_with_one_line_when_home_is_missing(tmp_path: Path, command: tuple[str, ...]) -> None:
    home = tmp_path / "never-initialised"
    line = assert_one_line_failure(cli_process(*command, "--home", home))
    assert line.startswith(ERROR)
    assert "engram-memory init" in line
    assert not home.exists()


@pytest.mark.parametrize(
    "command", [("confirmations", "list"), ("bind", *BIND_ARGS), ("serve",)], ids=["list", "bind", "serve"]
)
def test_host_command_fails_with_one_line_when_home_is_a_file(tmp_path: Path, command: tuple[str, ...]) -> None:
    home = tmp_path / "home"
    home.write_text("a file, not a home", encoding="utf-8")
    line = assert_one_line_failure(cli(*command, "--home", home))
    assert line.startswith(ERROR)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a folder whatever its mode")
@pytest.mark.parametrize(
    "command", [("confirmations", "list"), ("bind", *BIND_ARGS), ("serve",)], ids=["list", "bind", "serve"]
)
def test_host_command_fails_with_one_line_when_home_is_unreadable(tmp_path: Path, command: tuple[str, ...]) -> None:
    home = tmp_path / "home"
    _init(home)
    home.chmod(0)
    try:
        line = assert_one_line_failure(cli(*command, "--home", home))
    finally:
        home.chmod(0o700)
    assert line.startswith(ERROR)


def _config_is_a_folder(paths: HostPaths) -> None:
    paths.config.unlink()
    paths.config.mkdir()


def _config_not_utf8(paths: HostPaths) -> None:
    paths.config.write_bytes(b'store = "\xff\xfe"\n')


def _config_other_store(paths: HostPaths) -> None:
    paths.config.write_text('store = "mysql://db/engram"\n', encoding="utf-8")


def _config_not_toml(paths: HostPaths) -> None:
    paths.config.write_text("store = \n", encoding="utf-8")


def _kek_not_json(paths: HostPaths) -> None:
    paths.kek_file.write_text("{", encoding="utf-8")


def _kek_short_key(paths: HostPaths) -> None:
    paths.kek_file.write_text('{"active": "a", "keys": {"a": "AAAA"}}', encoding="utf-8")


def _kek_is_a_folder(paths: HostPaths) -> None:
    paths.kek_file.unlink()
    paths.kek_file.mkdir()


def _secret_missing(paths: HostPaths) -> None:
    paths.secret_file.unlink()


def _secret_short(paths: HostPaths) -> None:
    paths.secret_file.write_bytes(b"short")


def _store_missing(paths: HostPaths) -> None:
    paths.sqlite_file.unlink()


def _store_garbage(paths: HostPaths) -> None:
    paths.sqlite_file.write_bytes(b"this is not a database" * 100)


BROKEN_HOMES = {
    "config-is-a-folder": (_config_is_a_folder, "cannot read"),
    "config-not-utf8": (_config_not_utf8, "config.toml"),
    "config-other-store": (_config_other_store, "config.toml names a store this version cannot open"),
    "config-not-toml": (_config_not_toml, "config.toml"),
    "kek-not-json": (_kek_not_json, "kek.json is malformed"),
    "kek-short-key": (_kek_short_key, "kek.json is malformed"),
    "kek-is-a-folder": (_kek_is_a_folder, "cannot read kek.json"),
    "secret-missing": (_secret_missing, "cannot read secret.key"),
    "secret-short": (_secret_short, "secret.key is malformed"),
    "store-missing": (_store_missing, "no store in"),
    "store-garbage": (_store_garbage, "the store is unavailable"),
}


@pytest.mark.parametrize("breakage", sorted(BROKEN_HOMES))
@pytest.mark.parametrize("command", [("confirmations", "list"), ("serve",)], ids=["list", "serve"])
def test_host_command_fails_with_one_line_when_home_is_broken(
    tmp_path: Path, breakage: str, command: tuple[str, ...]
) -> None:
    paths = _init(tmp_path / "home")
    breaker, expected = BROKEN_HOMES[breakage]
    breaker(paths)
    line = assert_one_line_failure(cli(*command, "--home", paths.home))
    assert line.startswith(ERROR)
    assert expected in line


def _locked_signing_key() -> bytes:
    return Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"a host pass-phrase"),
    )


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"junk", "host-signing.pem is malformed"),
        (None, "cannot read host-signing.pem: run 'engram-memory init' first"),
        (_locked_signing_key(), "host-signing.pem"),
    ],
    ids=["junk", "missing", "passphrase-protected"],
)
@pytest.mark.parametrize("command", [("bind", *BIND_ARGS), ("serve", "--binding", "any-token")], ids=["bind", "serve"])
def test_host_command_fails_with_one_line_when_signing_key_is_broken(
    tmp_path: Path, content: bytes | None, expected: str, command: tuple[str, ...]
) -> None:
    paths = _init(tmp_path / "home")
    if content is None:
        paths.signing_key_file.unlink()
    else:
        paths.signing_key_file.write_bytes(content)
    line = assert_one_line_failure(cli(*command, "--home", paths.home))
    assert line.startswith(ERROR + expected)


def test_home_flag_works_after_the_subcommand_arguments(tmp_path: Path) -> None:
    paths = _init(tmp_path / "home")
    request = _forget_request(paths)
    out = _ok(cli("confirmations", "approve", request.confirmation_id, "--home", paths.home))
    assert out.startswith(f"approved {request.confirmation_id} ")


def test_home_flag_works_between_the_subcommand_arguments(tmp_path: Path) -> None:
    paths = _init(tmp_path / "home")
    request = _forget_request(paths)
    out = _ok(cli("confirmations", "deny", "--home", paths.home, request.confirmation_id))
    assert out.startswith(f"denied {request.confirmation_id} ")


def test_engram_home_sets_the_home_for_every_subcommand(tmp_path: Path) -> None:
    paths = _init(tmp_path / "home")
    env = {"ENGRAM_HOME": str(paths.home)}
    request = _forget_request(paths)
    assert [item["id"] for item in json.loads(_ok(cli("confirmations", "list", "--json", env=env)))] == [
        request.confirmation_id
    ]
    assert _ok(cli("confirmations", "approve", request.confirmation_id, env=env)).startswith("approved ")
    token = _ok(cli("bind", *BIND_ARGS, env=env)).strip()
    assert verify_binding(load_signing_key(paths).public_key(), token).tenant == "acme"


def test_home_flag_beats_engram_home(tmp_path: Path) -> None:
    paths = _init(tmp_path / "home")
    other = _init(tmp_path / "other")
    _forget_request(paths)
    env = {"ENGRAM_HOME": str(other.home)}
    assert len(json.loads(_ok(cli("confirmations", "list", "--json", "--home", paths.home, env=env)))) == 1
    assert json.loads(_ok(cli("confirmations", "list", "--json", env=env))) == []


def test_home_flag_beats_engram_home_that_does_not_exist(tmp_path: Path) -> None:
    paths = _init(tmp_path / "home")
    env = {"ENGRAM_HOME": str(tmp_path / "nowhere")}
    assert _ok(cli("confirmations", "list", "--home", paths.home, env=env)) == "no confirmation requests\n"


@pytest.mark.parametrize(
    "command",
    [
        ("bind", "--workspace", "w", "--principal", "p", "--agent", "a", "--session", "s", "--purpose", "x"),
        ("confirmations", "approve", "conf_aaaaaaaaaaaaaaaa", "--ttl", "soon"),
        ("confirmations", "approve"),
        ("no-such-command",),
    ],
    ids=["bind-missing-tenant", "approve-ttl-not-a-number", "approve-missing-id", "unknown-command"],
)
@pytest.mark.process
def test_usage_error_fails_with_one_line(tmp_path: Path, command: tuple[str, ...]) -> None:
    paths = _init(tmp_path / "home")
    done = cli_process(*command, "--home", paths.home)
    assert_one_line_failure(done)


# -- bind ----------------------------------------------------------------------------------------


@pytest.mark.process
def test_bind_prints_exactly_one_token_line(tmp_path: Path) -> None:
    paths = _init(tmp_path / "home")
    done = cli_process("bind", *BIND_ARGS, "--all-tools", "--home", paths.home)
    out = _ok(done)
    # The token id (for `revoke`) goes to stderr, so stdout stays exactly the token.
    assert re.fullmatch(
        r"engram-memory: token id bind_[a-z2-7]{16} \(revoke with: [^\n]*\), expires [^\n]*\n", done.stderr
    )
    assert out.endswith("\n")
    assert len(out.splitlines()) == 1
    assert JWT.fullmatch(out.strip())


def test_bind_json_carries_every_field_of_the_binding(tmp_path: Path) -> None:
    paths = _init(tmp_path / "home")
    before_s = int(time.time())
    data = _bind_json(paths.home, "--grant", "search", "--confirm-mutations", "--expires-in", "8h")
    after_s = int(time.time())
    assert set(data) == {
        "token",
        "token_id",
        "tenant",
        "workspace",
        "principal",
        "agent_id",
        "session",
        "purpose_ref",
        "grants",
        "confirm_mutations",
        "trust_class",
        "expires_at",
    }
    assert JWT.fullmatch(data["token"])
    assert re.fullmatch(r"bind_[a-z2-7]+", data["token_id"])
    assert (data["tenant"], data["workspace"], data["principal"]) == ("acme", "platform", "alice@acme")
    assert (data["agent_id"], data["session"], data["purpose_ref"]) == ("claude-code", "s-1", PURPOSE)
    assert data["grants"] == ["engram_memory_search"]
    assert data["confirm_mutations"] is True
    assert data["trust_class"] == "asserted"
    expires_ms = parse_instant(data["expires_at"])
    assert expires_ms is not None
    assert (before_s + 8 * 3600) * 1000 <= expires_ms <= (after_s + 8 * 3600) * 1000


def test_bind_json_token_verifies_to_the_printed_values(tmp_path: Path) -> None:
    paths = _init(tmp_path / "home")
    data = _bind_json(paths.home, "--grant", "forget", "--expires-in", "90s")
    binding = verify_binding(load_signing_key(paths).public_key(), data["token"])
    assert binding.token_id == data["token_id"]
    assert binding.tenant == "acme"
    assert binding.workspace == "platform"
    assert binding.principal == "alice@acme"
    assert binding.agent_id == "claude-code"
    assert binding.session == "s-1"
    assert binding.purpose_ref == PURPOSE
    assert binding.grants == frozenset({"engram_memory_forget"})
    assert binding.confirm_mutations is False
    assert binding.expires_at_ms - binding.issued_at_ms == 90_000
    assert parse_instant(data["expires_at"]) == binding.expires_at_ms


def test_bind_default_lifetime_is_seven_days(tmp_path: Path) -> None:
    paths = _init(tmp_path / "home")
    token = _ok(cli("bind", *BIND_ARGS, "--home", paths.home)).strip()
    binding = verify_binding(load_signing_key(paths).public_key(), token)
    assert binding.expires_at_ms - binding.issued_at_ms == 7 * 86_400_000


def test_bind_accepts_short_and_full_tool_names(tmp_path: Path) -> None:
    paths = _init(tmp_path / "home")
    data = _bind_json(paths.home, "--grant", "search", "--grant", "engram_memory_get")
    assert data["grants"] == ["engram_memory_get", "engram_memory_search"]


def test_bind_counts_a_tool_granted_twice_once(tmp_path: Path) -> None:
    paths = _init(tmp_path / "home")
    data = _bind_json(paths.home, "--grant", "capture", "--grant", "engram_memory_capture")
    assert data["grants"] == ["engram_memory_capture"]


def test_bind_all_tools_grants_the_six_tools(tmp_path: Path) -> None:
    paths = _init(tmp_path / "home")
    assert _bind_json(paths.home, "--all-tools")["grants"] == ALL_NAMES
    assert _bind_json(paths.home, "--all-tools", "--grant", "search")["grants"] == ALL_NAMES


def test_bind_without_grant_makes_a_token_granting_nothing(tmp_path: Path) -> None:
    paths = _init(tmp_path / "home")
    data = _bind_json(paths.home)
    assert data["grants"] == []
    assert verify_binding(load_signing_key(paths).public_key(), data["token"]).grants == frozenset()


def test_bind_accepts_a_lifetime_of_exactly_366_days(tmp_path: Path) -> None:
    paths = _init(tmp_path / "home")
    token = _ok(cli("bind", *BIND_ARGS, "--expires-in", "366d", "--home", paths.home)).strip()
    binding = verify_binding(load_signing_key(paths).public_key(), token)
    assert binding.expires_at_ms - binding.issued_at_ms == 366 * 86_400_000


DURATION_SHAPE = "a duration looks like 90s, 30m, 8h or 7d"
TOO_LONG = "a binding lives at most 366 days"


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (("--grant", "delete"), "unknown tool 'delete'"),
        (("--grant", "search", "--grant", "engram_memory_delete"), "unknown tool 'engram_memory_delete'"),
        (("--expires-in", "5y"), DURATION_SHAPE),
        (("--expires-in", "0s"), DURATION_SHAPE),
        (("--expires-in", "-1h"), DURATION_SHAPE),
        (("--expires-in=-1h",), DURATION_SHAPE),
        (("--expires-in", "1.5h"), DURATION_SHAPE),
        (("--expires-in", ""), DURATION_SHAPE),
        (("--expires-in", "367d"), TOO_LONG),
        (("--expires-in", "8785h"), TOO_LONG),
    ],
    ids=[
        "unknown-tool",
        "unknown-full-tool",
        "years",
        "zero",
        "negative",
        "negative-equals",
        "fraction",
        "empty",
        "367-days",
        "8785-hours",
    ],
)
def test_bind_fails_with_one_line_when_input_is_invalid(tmp_path: Path, extra: tuple[str, ...], expected: str) -> None:
    paths = _init(tmp_path / "home")
    assert assert_one_line_failure(cli("bind", *BIND_ARGS, *extra, "--home", paths.home)) == ERROR + expected


@pytest.mark.parametrize(
    ("tenant", "expected"),
    [
        ("e\u0301quipe", "tenant must be NFC text of at most 512 bytes"),
        ("acme\x07", "tenant must not contain control characters"),
        ("acme\u200b", "tenant must not contain control characters"),
        ("", "tenant must be a non-empty string"),
        ("t" * 513, "tenant must be NFC text of at most 512 bytes"),
    ],
    ids=["not-nfc", "bell", "zero-width-space", "empty", "513-bytes"],
)
def test_bind_fails_with_one_line_when_tenant_is_invalid(tmp_path: Path, tenant: str, expected: str) -> None:
    paths = _init(tmp_path / "home")
    args = ["--tenant", tenant, *BIND_ARGS[2:]]
    assert assert_one_line_failure(cli("bind", *args, "--home", paths.home)) == ERROR + expected


def test_bind_fails_with_one_line_when_tenant_holds_a_newline(tmp_path: Path) -> None:
    paths = _init(tmp_path / "home")
    args = ["--tenant", "acme\nevil", *BIND_ARGS[2:]]
    line = assert_one_line_failure(cli("bind", *args, "--home", paths.home))
    assert line == ERROR + "tenant must not contain control characters"


def test_bind_fails_with_one_line_when_unknown_tool_name_holds_a_newline(tmp_path: Path) -> None:
    paths = _init(tmp_path / "home")
    line = assert_one_line_failure(cli("bind", *BIND_ARGS, "--grant", "search\nforget", "--home", paths.home))
    assert line.startswith(ERROR + "unknown tool")


def test_bind_token_from_another_home_does_not_verify(tmp_path: Path) -> None:
    home_a = _init(tmp_path / "a")
    home_b = _init(tmp_path / "b")
    token = _ok(cli("bind", *BIND_ARGS, "--all-tools", "--home", home_a.home)).strip()
    with pytest.raises(BindingError, match="does not verify against this host's key"):
        verify_binding(load_signing_key(home_b).public_key(), token)
    assert verify_binding(load_signing_key(home_a).public_key(), token).principal == "alice@acme"


def test_bind_issues_a_new_token_id_each_time(tmp_path: Path) -> None:
    paths = _init(tmp_path / "home")
    ids = {_bind_json(paths.home)["token_id"] for _ in range(3)}
    assert len(ids) == 3


# -- serve ---------------------------------------------------------------------------------------


@pytest.mark.stdio
def test_serve_without_binding_warns_once_and_refuses_the_connection(tmp_path: Path) -> None:
    paths = _init(tmp_path / "home")
    stderr_file = tmp_path / "serve.stderr"
    message = refused_connection(paths.home, stderr_file)
    assert message == "Trusted invocation context unavailable: " + NO_BINDING
    lines = stderr_file.read_text(encoding="utf-8").splitlines()
    assert lines[0] == NO_BINDING_WARNING
    assert set(lines[1:]) <= {
        "engram-memory: WARNING answered a handshake without a usable binding with a JSON-RPC error"
    }


@pytest.mark.stdio
def test_serve_with_garbage_binding_refuses_the_connection(tmp_path: Path) -> None:
    paths = _init(tmp_path / "home")
    message = refused_connection(paths.home, tmp_path / "serve.stderr", "--binding", "not-a-token-at-all")
    assert message.endswith("the binding token does not verify against this host's key")


@pytest.mark.stdio
@pytest.mark.parametrize("where", ["flag", "environment"])
def test_serve_with_foreign_binding_warns_without_the_token(tmp_path: Path, where: str) -> None:
    paths = _init(tmp_path / "home")
    foreign = _init(tmp_path / "foreign")
    token = _ok(cli("bind", *BIND_ARGS, "--all-tools", "--home", foreign.home)).strip()
    stderr_file = tmp_path / "serve.stderr"
    args, env = (("--binding", token), {}) if where == "flag" else ((), {"ENGRAM_BINDING": token})
    refused_connection(paths.home, stderr_file, *args, env=env)
    stderr = stderr_file.read_text(encoding="utf-8")
    assert stderr.splitlines()[0] == BAD_BINDING_WARNING
    for part in token.split("."):
        assert part not in stderr


@pytest.mark.stdio
def test_serve_with_tampered_binding_warns_without_the_token(tmp_path: Path) -> None:
    paths = _init(tmp_path / "home")
    token = _ok(cli("bind", *BIND_ARGS, "--all-tools", "--home", paths.home)).strip()
    header, payload, signature = token.split(".")
    tampered = f"{header}.{payload[:-4]}{'AAAA' if payload[-4:] != 'AAAA' else 'BBBB'}.{signature}"
    stderr_file = tmp_path / "serve.stderr"
    refused_connection(paths.home, stderr_file, env={"ENGRAM_BINDING": tampered})
    stderr = stderr_file.read_text(encoding="utf-8")
    assert stderr.splitlines()[0] == BAD_BINDING_WARNING
    assert signature not in stderr


@pytest.mark.stdio
def test_serve_never_logs_the_token_of_a_valid_binding(tmp_path: Path) -> None:
    paths = _init(tmp_path / "home")
    data = _bind_json(paths.home, "--all-tools")
    token = data["token"]
    stderr_file = tmp_path / "serve.stderr"
    with LoggedAgent(paths.home, stderr_file, env={"ENGRAM_BINDING": token}) as agent:
        assert sorted(tool.name for tool in agent.list_tools()) == ALL_NAMES
        found = agent.value("engram_memory_search", {"query": "deploys", "purpose_ref": PURPOSE})
        assert found["records"] == []
    stderr = stderr_file.read_text(encoding="utf-8")
    assert stderr.splitlines() == [f"engram-memory: INFO serving over stdio; binding {data['token_id']} verified"]
    for part in token.split("."):
        assert part not in stderr


@pytest.mark.stdio
def test_serve_binding_flag_beats_engram_binding(tmp_path: Path) -> None:
    paths = _init(tmp_path / "home")
    token = _ok(cli("bind", *BIND_ARGS, "--grant", "search", "--home", paths.home)).strip()
    stderr_file = tmp_path / "serve.stderr"
    with LoggedAgent(paths.home, stderr_file, "--binding", token, env={"ENGRAM_BINDING": "garbage"}) as agent:
        assert [tool.name for tool in agent.list_tools()] == ["engram_memory_search"]
    refused_connection(paths.home, stderr_file, "--binding", "garbage", env={"ENGRAM_BINDING": token})


@pytest.mark.stdio
def test_serve_lists_exactly_the_granted_tools_when_granted_by_short_and_full_name(tmp_path: Path) -> None:
    paths = _init(tmp_path / "home")
    token = _ok(cli("bind", *BIND_ARGS, "--grant", "search", "--grant", "engram_memory_get", "--home", paths.home))
    with StdioAgent(paths.home, token.strip()) as agent:
        assert sorted(tool.name for tool in agent.list_tools()) == ["engram_memory_get", "engram_memory_search"]
        with pytest.raises(MCPError) as raised:
            agent.raw_call("engram_memory_forget", {"record_id": "mem_x", "idempotency_key": unique_key()})
        assert (raised.value.code, raised.value.message) == (-32602, "Unknown tool")


@pytest.mark.stdio
def test_serve_with_binding_granting_nothing_lists_no_tools_and_answers_unknown_tool(tmp_path: Path) -> None:
    paths = _init(tmp_path / "home")
    token = _ok(cli("bind", *BIND_ARGS, "--home", paths.home)).strip()
    with StdioAgent(paths.home, token) as agent:
        assert agent.list_tools() == []
        with pytest.raises(MCPError) as raised:
            agent.raw_call("engram_memory_search", {"query": "deploys", "purpose_ref": PURPOSE})
        assert (raised.value.code, raised.value.message) == (-32602, "Unknown tool")


@pytest.mark.stdio
def test_serve_with_expired_binding_refuses_the_connection(tmp_path: Path) -> None:
    paths = _init(tmp_path / "home")
    expired = bind(paths, now_s=int(time.time()) - 7200, lifetime_s=3600)
    message = refused_connection(paths.home, tmp_path / "serve.stderr", env={"ENGRAM_BINDING": expired.token})
    assert message.startswith(f"Trusted invocation context unavailable: binding {expired.binding.token_id} expired")


# -- confirmations -------------------------------------------------------------------------------


def test_confirmations_list_says_no_requests_when_queue_is_empty(tmp_path: Path) -> None:
    paths = _init(tmp_path / "home")
    done = cli("confirmations", "list", "--home", paths.home)
    assert _ok(done) == "no confirmation requests\n"
    assert done.stderr == ""


@pytest.mark.process
def test_confirmations_list_json_is_an_empty_array_when_queue_is_empty(tmp_path: Path) -> None:
    paths = _init(tmp_path / "home")
    assert _ok(cli_process("confirmations", "list", "--json", "--home", paths.home)) == "[]\n"
    assert _list_json(paths.home, "--all") == []


def test_confirmations_list_json_shows_the_forget_request_of_an_agent(tmp_path: Path) -> None:
    paths = _init(tmp_path / "home")
    request = _forget_request(paths)
    [item] = _list_json(paths.home)
    requested_ms = parse_instant(item.pop("requested_at"))
    assert requested_ms is not None
    assert abs(requested_ms - time.time() * 1000) < 120_000
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", item.pop("operation_digest"))
    assert item == {
        "id": request.confirmation_id,
        "status": "requested",
        "tool": "engram_memory_forget",
        "target": request.record_id,
        "tenant": "tenant-a",
        "workspace": "workspace-1",
        "principal": "alice",
        "agent_id": "agent-1",
        "session": "session-1",
        "reason_ref": "ticket:OPS-1",
        "summary": {
            "operation": "tombstone",
            "record_id": request.record_id,
            "from_state": "accepted_current",
            "destroys": ["record body", "record data key", "lexical index entry"],
        },
        "decided_at": None,
        "decided_by": None,
        "approval_expires_at": None,
    }


def test_confirmations_list_shows_the_full_request_id_a_human_must_type(tmp_path: Path) -> None:
    paths = _init(tmp_path / "home")
    request = _forget_request(paths)
    out = _ok(cli("confirmations", "list", "--home", paths.home))
    assert "requested" in out
    assert request.confirmation_id in out


def test_confirmations_approve_prints_the_expiry_of_the_approval(tmp_path: Path) -> None:
    paths = _init(tmp_path / "home")
    request = _forget_request(paths)
    before_ms = int(time.time() * 1000)
    out = _ok(cli("confirmations", "approve", request.confirmation_id, "--ttl", "60", "--home", paths.home))
    after_ms = int(time.time() * 1000)
    match = re.fullmatch(
        rf"approved {request.confirmation_id} \(engram_memory_forget {request.record_id}\) until (\S+): "
        r"the agent may now repeat the identical call\n",
        out,
    )
    assert match, out
    until_ms = parse_instant(match.group(1))
    assert until_ms is not None
    assert before_ms + 60_000 <= until_ms <= after_ms + 60_000


def test_confirmations_approve_json_reports_the_decision(tmp_path: Path) -> None:
    paths = _init(tmp_path / "home")
    request = _forget_request(paths)
    data = json.loads(_ok(cli("confirmations", "approve", request.confirmation_id, "--json", "--home", paths.home)))
    assert data["id"] == request.confirmation_id
    assert data["status"] == "approved"
    assert data["decided_by"] == current_user()
    decided_ms = parse_instant(data["decided_at"])
    expires_ms = parse_instant(data["approval_expires_at"])
    assert decided_ms is not None
    assert expires_ms is not None
    assert expires_ms - decided_ms == 300_000


@pytest.mark.parametrize("ttl", [1, 300])
def test_confirmations_approve_accepts_ttl_at_the_bounds(tmp_path: Path, ttl: int) -> None:
    paths = _init(tmp_path / "home")
    request = _forget_request(paths)
    out = _ok(
        cli("confirmations", "approve", request.confirmation_id, "--ttl", str(ttl), "--json", "--home", paths.home)
    )
    data = json.loads(out)
    decided_ms = parse_instant(data["decided_at"])
    expires_ms = parse_instant(data["approval_expires_at"])
    assert decided_ms is not None
    assert expires_ms is not None
    assert expires_ms - decided_ms == ttl * 1000


@pytest.mark.parametrize("ttl", ["0", "301", "-1", "100000"])
def test_confirmations_approve_refuses_ttl_out_of_bounds(tmp_path: Path, ttl: str) -> None:
    paths = _init(tmp_path / "home")
    request = _forget_request(paths)
    line = assert_one_line_failure(
        cli("confirmations", "approve", request.confirmation_id, f"--ttl={ttl}", "--home", paths.home)
    )
    assert line == ERROR + Refusal.APPROVAL_TTL.value
    assert [item["status"] for item in _list_json(paths.home)] == ["requested"]


def test_confirmations_approve_lets_the_identical_call_execute_once(tmp_path: Path) -> None:
    paths = _init(tmp_path / "home")
    request = _forget_request(paths)
    _ok(cli("confirmations", "approve", request.confirmation_id, "--home", paths.home))
    binding = bind(paths).binding
    with engine_for(paths) as engine:
        forgotten = engine.handle(binding, Tool.FORGET, request.forget_args)
    assert forgotten["ok"], forgotten
    assert forgotten["output"]["value"]["receipt"]["to_state"] == "tombstoned"
    [item] = _list_json(paths.home, "--all")
    assert (item["id"], item["status"]) == (request.confirmation_id, "consumed")
    line = assert_one_line_failure(cli("confirmations", "approve", request.confirmation_id, "--home", paths.home))
    assert line == ERROR + "the confirmation request is already consumed"


def test_confirmations_deny_prints_the_denial(tmp_path: Path) -> None:
    paths = _init(tmp_path / "home")
    request = _forget_request(paths)
    out = _ok(cli("confirmations", "deny", request.confirmation_id, "--home", paths.home))
    assert out == f"denied {request.confirmation_id} (engram_memory_forget {request.record_id})\n"
    assert _list_json(paths.home) == []
    binding = bind(paths).binding
    with engine_for(paths) as engine:
        again = engine.handle(binding, Tool.FORGET, request.forget_args)
    assert again["error"]["code"] == "gate_failed"
    assert _list_json(paths.home) == []


def test_confirmations_deny_json_reports_the_decision(tmp_path: Path) -> None:
    paths = _init(tmp_path / "home")
    request = _forget_request(paths)
    data = json.loads(_ok(cli("confirmations", "deny", request.confirmation_id, "--json", "--home", paths.home)))
    assert (data["id"], data["status"], data["tool"]) == (request.confirmation_id, "denied", "engram_memory_forget")
    assert data["decided_by"] == current_user()
    assert parse_instant(data["decided_at"]) is not None
    assert data["approval_expires_at"] is None


@pytest.mark.parametrize("verb", ["approve", "deny"])
def test_confirmations_decision_fails_with_one_line_when_id_is_unknown(tmp_path: Path, verb: str) -> None:
    paths = _init(tmp_path / "home")
    _forget_request(paths)
    line = assert_one_line_failure(cli("confirmations", verb, "conf_doesnotexist00", "--home", paths.home))
    assert line == ERROR + "no such confirmation request"


@pytest.mark.parametrize(
    ("first", "second", "expected"),
    [
        ("approve", "approve", "the confirmation request is already approved"),
        ("approve", "deny", "the confirmation request is already approved"),
        ("deny", "approve", "the confirmation request is already denied"),
        ("deny", "deny", "the confirmation request is already denied"),
    ],
)
def test_confirmations_decision_fails_with_one_line_when_already_decided(
    tmp_path: Path, first: str, second: str, expected: str
) -> None:
    paths = _init(tmp_path / "home")
    request = _forget_request(paths)
    _ok(cli("confirmations", first, request.confirmation_id, "--home", paths.home))
    line = assert_one_line_failure(cli("confirmations", second, request.confirmation_id, "--home", paths.home))
    assert line == ERROR + expected


@pytest.mark.parametrize("verb", ["approve", "deny"])
def test_confirmations_decision_fails_with_one_line_when_request_expired(tmp_path: Path, verb: str) -> None:
    paths = _init(tmp_path / "home")
    binding = bind(paths).binding
    two_hours_ago = ManualClock(start_ms=int(time.time() * 1000) - 2 * 3_600_000)
    with steered_engine(paths, clock=two_hours_ago) as engine:
        captured = engine.handle(binding, Tool.CAPTURE, capture_args("Old request: rotate the ops pager weekly."))
        candidate_id = captured["output"]["value"]["candidate_id"]
        admitted = engine.handle(
            binding, Tool.REQUEST_ADMISSION, {"candidate_id": candidate_id, "idempotency_key": unique_key("admit")}
        )
        record_id = admitted["output"]["value"]["outcome"]["record_id"]
        refused = engine.handle(
            binding, Tool.FORGET, {"record_id": record_id, "idempotency_key": unique_key(), "reason_ref": "ticket:9"}
        )
        assert refused["error"]["code"] == "gate_failed"
    assert _list_json(paths.home) == []
    [item] = _list_json(paths.home, "--all")
    assert item["status"] == "expired"
    line = assert_one_line_failure(cli("confirmations", verb, item["id"], "--home", paths.home))
    assert line == ERROR + "the confirmation request has expired; the agent must ask again"


def test_confirmations_approve_fails_with_one_line_when_approval_lapsed(tmp_path: Path) -> None:
    paths = _init(tmp_path / "home")
    request = _forget_request(paths)
    _ok(cli("confirmations", "approve", request.confirmation_id, "--ttl", "1", "--home", paths.home))
    time.sleep(1.2)
    [item] = _list_json(paths.home, "--all")
    assert item["status"] == "expired"
    line = assert_one_line_failure(cli("confirmations", "approve", request.confirmation_id, "--home", paths.home))
    assert line == ERROR + "the confirmation request has expired; the agent must ask again"


def test_confirmations_list_all_shows_decided_requests(tmp_path: Path) -> None:
    paths = _init(tmp_path / "home")
    approved = _forget_request(paths)
    denied = _forget_request(paths)
    waiting = _forget_request(paths)
    _ok(cli("confirmations", "approve", approved.confirmation_id, "--home", paths.home))
    _ok(cli("confirmations", "deny", denied.confirmation_id, "--home", paths.home))
    assert [item["id"] for item in _list_json(paths.home)] == [waiting.confirmation_id]
    statuses = {item["id"]: item["status"] for item in _list_json(paths.home, "--all")}
    assert statuses == {
        approved.confirmation_id: "approved",
        denied.confirmation_id: "denied",
        waiting.confirmation_id: "requested",
    }
    out = _ok(cli("confirmations", "list", "--all", "--home", paths.home))
    for status in ("approved", "denied", "requested"):
        assert status in out


# -- demo ----------------------------------------------------------------------------------------


@pytest.mark.stdio
@pytest.mark.process
def test_demo_runs_a_scripted_session_to_the_forgotten_record(tmp_path: Path) -> None:
    done = cli_process("demo", env={"TMPDIR": str(tmp_path)}, timeout=120)
    out = _ok(done)
    lines = out.splitlines()
    assert any(line.startswith("HOST ") for line in lines)
    assert any(line.startswith("AGENT") for line in lines)
    assert "gate_failed" in out
    assert "tombstoned" in out
    assert out.index("gate_failed") < out.index("tombstoned") < out.index("0 records: the forgotten memory is gone")
    assert lines[-2].strip().endswith("0 records: the forgotten memory is gone")
    assert "Traceback" not in done.stderr
    assert list(tmp_path.iterdir()) == []


def test_the_command_line_loads_no_server_until_a_command_serves() -> None:
    """Every host command starts a new process: the MCP server, the web stack and the console are
    loaded by `serve`, `console` and `demo` only (they were half of every command's start-up)."""
    probe = (
        "import sys, engram_memory.host.cli.app; "
        "print(sorted(m for m in ('mcp.server', 'uvicorn', 'starlette', 'engram_memory.host.console.app') "
        "if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60)
    assert done.stdout.strip() == "[]"
