"""The composition root: a fresh folder becomes a home, a home becomes a running engine over its files."""

from __future__ import annotations

import base64
import json
import os
import stat
import tomllib
from pathlib import Path

import pytest

from engram_memory.contract.errors import ContractError, ErrorCode
from engram_memory.contract.tools import Tool
from engram_memory.host.compose import (
    HomeError,
    InitReport,
    configured_store,
    current_user,
    init_home,
    open_engine,
    verify_token,
)
from engram_memory.host.policy_file import DEFAULT_POLICY_TOML
from engram_memory.host.settings import HostPaths
from tests.support.homes import bind, make_home
from tests.support.payloads import PURPOSE, capture_args, unique_key


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _files(paths: HostPaths) -> dict[Path, bytes]:
    return {
        p: p.read_bytes()
        for p in (
            paths.config,
            paths.policy,
            paths.kek_file,
            paths.secret_file,
            paths.signing_key_file,
            paths.recovery_file,
        )
    }


def _capture_and_admit(paths: HostPaths, text: str) -> str:
    binding = bind(paths).binding
    with open_engine(paths) as engine:
        captured = engine.handle(binding, Tool.CAPTURE, capture_args(text))
        assert captured["ok"], captured
        admitted = engine.handle(
            binding,
            Tool.REQUEST_ADMISSION,
            {"candidate_id": captured["output"]["value"]["candidate_id"], "idempotency_key": unique_key("admit")},
        )
        assert admitted["ok"], admitted
    record_id: str = admitted["output"]["value"]["outcome"]["record_id"]
    return record_id


# -- init_home -----------------------------------------------------------------------------------


def test_init_home_creates_every_file_when_folder_is_new(tmp_path: Path) -> None:
    paths = HostPaths(home=tmp_path / "new" / "home")
    report = init_home(paths)
    assert report == InitReport(
        created=[
            paths.config,
            paths.policy,
            paths.kek_file,
            paths.secret_file,
            paths.signing_key_file,
            paths.recovery_file,
            paths.sqlite_file,
            paths.vault_file,
        ],
        store="sqlite",
    )
    assert tomllib.loads(paths.config.read_text(encoding="utf-8")) == {"store": "sqlite"}
    assert paths.policy.read_text(encoding="utf-8") == DEFAULT_POLICY_TOML
    assert paths.sqlite_file.is_file()


def test_init_home_makes_private_folders(tmp_path: Path) -> None:
    paths = HostPaths(home=tmp_path / "home")
    init_home(paths)
    assert _mode(paths.home) == 0o700
    assert _mode(paths.keys_dir) == 0o700
    assert _mode(paths.store_dir) == 0o700


def test_init_home_changes_nothing_when_run_twice(tmp_path: Path) -> None:
    paths = HostPaths(home=tmp_path / "home")
    init_home(paths)
    before = _files(paths)
    assert init_home(paths) == InitReport(created=[], store="sqlite")
    assert init_home(paths, "sqlite") == InitReport(created=[], store="sqlite")
    assert _files(paths) == before


def test_init_home_keeps_the_data_of_an_existing_store(tmp_path: Path) -> None:
    paths = make_home(tmp_path / "home")
    record_id = _capture_and_admit(paths, "The release train leaves every Tuesday at noon.")
    init_home(paths)
    binding = bind(paths).binding
    with open_engine(paths) as engine:
        got = engine.handle(binding, Tool.GET, {"record_id": record_id, "purpose_ref": PURPOSE})
    assert got["ok"], got


def test_init_home_keeps_an_edited_policy(tmp_path: Path) -> None:
    paths = make_home(tmp_path / "home")
    paths.policy.write_text('mode = "review"\n', encoding="utf-8")
    init_home(paths)
    assert paths.policy.read_text(encoding="utf-8") == 'mode = "review"\n'


@pytest.mark.parametrize(
    ("store", "reason"),
    [
        ("postgresql://x", "the PostgreSQL server could not be reached as the owner"),
        ("postgresql://user:pw@db:5432/engram", "--store must not carry a password"),
        ("mysql", "--store takes 'sqlite' or a postgresql:// URL"),
        ("SQLITE", "--store takes 'sqlite' or a postgresql:// URL"),
    ],
)
def test_init_home_refuses_a_store_it_cannot_use_and_creates_nothing(tmp_path: Path, store: str, reason: str) -> None:
    paths = HostPaths(home=tmp_path / "home")
    with pytest.raises(HomeError) as raised:
        init_home(paths, store)
    assert str(raised.value).startswith(reason)
    assert not paths.home.exists()


def test_init_home_refusal_does_not_echo_store_credentials(tmp_path: Path) -> None:
    with pytest.raises(HomeError) as raised:
        init_home(HostPaths(home=tmp_path / "home"), "postgresql://user:hunter2@db/engram")
    assert "hunter2" not in str(raised.value)


def test_init_home_refuses_when_config_names_another_store(tmp_path: Path) -> None:
    paths = make_home(tmp_path / "home")
    paths.config.write_text('store = "postgresql"\n', encoding="utf-8")
    with pytest.raises(HomeError):
        init_home(paths)


# -- configured_store / open_engine --------------------------------------------------------------


def test_configured_store_is_sqlite_after_init(sqlite_paths: HostPaths) -> None:
    assert configured_store(sqlite_paths) == "sqlite"


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (b'store = "postgresql"\n', "config.toml names a store this version cannot open"),
        (b"", "config.toml names a store this version cannot open"),
        (b"store = 1\n", "config.toml names a store this version cannot open"),
        (b"store = \n", "cannot read"),
    ],
    ids=["other-store", "empty", "number", "not-toml"],
)
def test_configured_store_raises_home_error_when_config_is_wrong(paths: HostPaths, config: bytes, message: str) -> None:
    paths.config.write_bytes(config)
    with pytest.raises(HomeError) as raised:
        configured_store(paths)
    assert message in str(raised.value)


def test_configured_store_raises_home_error_when_config_is_not_utf8(paths: HostPaths) -> None:
    paths.config.write_bytes(b'store = "sqlite" # caf\xe9\n')
    with pytest.raises(HomeError):
        configured_store(paths)


def test_open_engine_raises_home_error_when_home_is_missing(tmp_path: Path) -> None:
    paths = HostPaths(home=tmp_path / "absent")
    with pytest.raises(HomeError) as raised, open_engine(paths):
        pass
    assert str(raised.value) == f"cannot read {paths.config}: run 'engram-memory init' first"
    assert not paths.home.exists()


def test_open_engine_raises_home_error_when_the_sqlite_store_file_is_missing(sqlite_paths: HostPaths) -> None:
    paths = sqlite_paths
    paths.sqlite_file.unlink()
    with pytest.raises(HomeError) as raised, open_engine(paths):
        pass
    assert str(raised.value) == f"no store in {paths.home}: run 'engram-memory init' first"
    assert not paths.sqlite_file.exists()


def test_open_engine_serves_what_an_earlier_engine_wrote(paths: HostPaths) -> None:
    record_id = _capture_and_admit(paths, "Feature flags are removed two releases after full rollout.")
    binding = bind(paths).binding
    with open_engine(paths) as engine:
        found = engine.handle(binding, Tool.SEARCH, {"query": "feature flags removed", "purpose_ref": PURPOSE})
    assert found["ok"], found
    assert [item["record"]["record_id"] for item in found["output"]["value"]["records"]] == [record_id]


def test_open_engine_refuses_bodies_rather_than_misread_them_after_the_key_file_is_replaced(
    paths: HostPaths,
) -> None:
    record_id = _capture_and_admit(paths, "On-call hand-off happens at 09:00 UTC in the ops channel.")
    other_key = base64.b64encode(os.urandom(32)).decode("ascii")
    paths.kek_file.write_text(json.dumps({"active": "kek-other", "keys": {"kek-other": other_key}}), encoding="utf-8")
    binding = bind(paths).binding
    with open_engine(paths) as engine:
        got = engine.handle(binding, Tool.GET, {"record_id": record_id, "purpose_ref": PURPOSE})
    assert got["ok"] is False
    assert got["error"]["code"] == "BLOB_MISSING"


def test_open_engine_answers_policy_unavailable_until_the_policy_is_fixed(paths: HostPaths) -> None:
    binding = bind(paths).binding
    paths.policy.write_text('mode = "maybe"\n', encoding="utf-8")
    with open_engine(paths) as engine:
        broken = engine.handle(binding, Tool.CAPTURE, capture_args("Database migrations run before the deploy."))
        assert broken["ok"] is False
        assert broken["error"]["code"] == "POLICY_UNAVAILABLE"
        assert broken["error"]["retriable"] is True
        paths.policy.write_text(DEFAULT_POLICY_TOML + "\n# fixed\n", encoding="utf-8")
        fixed = engine.handle(binding, Tool.CAPTURE, capture_args("Database migrations run before the deploy."))
        assert fixed["ok"], fixed


def test_open_engine_answers_policy_unavailable_when_the_policy_is_not_utf8(paths: HostPaths) -> None:
    binding = bind(paths).binding
    paths.policy.write_bytes(b'policy_id = "caf\xe9"\n')
    with open_engine(paths) as engine:
        envelope = engine.handle(binding, Tool.CAPTURE, capture_args("Queues are drained before a schema change."))
    assert envelope["ok"] is False
    assert envelope["error"]["code"] == "POLICY_UNAVAILABLE"


def test_open_engine_closes_the_store_when_the_block_ends(paths: HostPaths) -> None:
    with open_engine(paths) as engine:
        store = engine.deps.store
    with pytest.raises(ContractError) as raised, store.read():
        pass
    assert raised.value.code is ErrorCode.STORE_UNAVAILABLE


# -- verify_token --------------------------------------------------------------------------------


@pytest.mark.parametrize("token", [None, ""])
def test_verify_token_says_when_no_token_is_given(paths: HostPaths, token: str | None) -> None:
    assert verify_token(paths, token) == (None, "no binding given (--binding, --binding-file or ENGRAM_BINDING)")


@pytest.mark.parametrize("token", ["garbage", "a.b.c", " "])
def test_verify_token_says_when_a_token_does_not_verify(paths: HostPaths, token: str) -> None:
    binding, reason = verify_token(paths, token)
    assert binding is None
    assert reason == "the binding token does not verify against this host's key"


def test_verify_token_refuses_a_token_of_another_home(paths: HostPaths, tmp_path: Path) -> None:
    other = make_home(tmp_path / "other")
    binding, reason = verify_token(paths, bind(other).token)
    assert binding is None
    assert reason == "the binding token does not verify against this host's key"


def test_verify_token_accepts_a_token_with_surrounding_whitespace(paths: HostPaths) -> None:
    issued = bind(paths)
    assert verify_token(paths, f"  {issued.token}\n") == (issued.binding, None)


def test_verify_token_reason_never_contains_the_token(paths: HostPaths, tmp_path: Path) -> None:
    token = bind(make_home(tmp_path / "other")).token
    _, reason = verify_token(paths, token)
    assert reason is not None
    for part in token.split("."):
        assert part not in reason


# -- current_user --------------------------------------------------------------------------------


def test_current_user_names_the_host_user() -> None:
    user = current_user()
    assert user.startswith("host:")
    assert len(user) > len("host:")


def test_current_user_follows_the_login_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOGNAME", "operator-7")
    assert current_user() == "host:operator-7"
