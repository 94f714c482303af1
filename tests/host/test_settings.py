"""Where the host's files live: `--home` beats `ENGRAM_HOME` beats the default; the binding flag beats
`ENGRAM_BINDING`. Environments are passed explicitly, so the test process's own variables never leak in."""

from __future__ import annotations

from pathlib import Path

import pytest

from engram_memory.host.settings import (
    BINDING_ENV,
    DEFAULT_HOME,
    HOME_ENV,
    MODEL_CACHE_ENV,
    HostPaths,
    SettingsError,
    StoreSettings,
    binding_from_environment,
    model_cache_from_environment,
    parse_store_settings,
    resolve_home,
)


def test_environment_variable_names_are_the_documented_ones() -> None:
    assert (HOME_ENV, BINDING_ENV, MODEL_CACHE_ENV) == ("ENGRAM_HOME", "ENGRAM_BINDING", "ENGRAM_MODEL_CACHE")


def test_the_model_cache_is_the_operators_folder_or_the_embeddings_default(tmp_path: Path) -> None:
    assert model_cache_from_environment({MODEL_CACHE_ENV: str(tmp_path)}) == tmp_path
    assert model_cache_from_environment({MODEL_CACHE_ENV: "  "}) is None
    assert model_cache_from_environment({}) is None


def test_resolve_home_uses_flag_when_flag_and_environment_are_given(tmp_path: Path) -> None:
    paths = resolve_home(tmp_path / "flag", {HOME_ENV: str(tmp_path / "env")})
    assert paths == HostPaths(home=tmp_path / "flag")


def test_resolve_home_uses_environment_when_no_flag_is_given(tmp_path: Path) -> None:
    assert resolve_home(None, {HOME_ENV: str(tmp_path / "env")}).home == tmp_path / "env"


def test_resolve_home_uses_default_when_neither_is_given() -> None:
    expected = Path.home() / ".local" / "share" / "engram-memory"
    assert resolve_home(None, {}).home == expected
    assert DEFAULT_HOME.expanduser() == expected


def test_resolve_home_uses_default_when_environment_value_is_empty() -> None:
    assert resolve_home(None, {HOME_ENV: ""}).home == Path.home() / ".local" / "share" / "engram-memory"


def test_resolve_home_ignores_unrelated_variables(tmp_path: Path) -> None:
    environ = {"HOME_DIR": str(tmp_path), "ENGRAM_HOMES": str(tmp_path), "ENGRAM_BINDING": "x"}
    assert resolve_home(None, environ).home == Path.home() / ".local" / "share" / "engram-memory"


def test_resolve_home_expands_tilde_in_flag_and_environment() -> None:
    assert resolve_home(Path("~/h"), {}).home == Path.home() / "h"
    assert resolve_home(None, {HOME_ENV: "~/e"}).home == Path.home() / "e"


def test_resolve_home_makes_a_relative_flag_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    paths = resolve_home(Path("relative/home"), {})
    assert paths.home.is_absolute()
    assert paths.home == tmp_path / "relative" / "home"


def test_resolve_home_reads_process_environment_when_none_is_passed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(HOME_ENV, str(tmp_path / "from-process"))
    assert resolve_home(None).home == tmp_path / "from-process"
    assert resolve_home(tmp_path / "flag").home == tmp_path / "flag"


def test_host_paths_place_every_file_under_the_home(tmp_path: Path) -> None:
    paths = HostPaths(home=tmp_path)
    assert paths.config == tmp_path / "config.toml"
    assert paths.policy == tmp_path / "policy.toml"
    assert paths.store_dir == tmp_path / "store"
    assert paths.sqlite_file == tmp_path / "store" / "engram.db"
    assert paths.keys_dir == tmp_path / "keys"
    assert paths.kek_file == tmp_path / "keys" / "kek.json"
    assert paths.secret_file == tmp_path / "keys" / "secret.key"
    assert paths.signing_key_file == tmp_path / "keys" / "host-signing.pem"


def test_binding_from_environment_uses_flag_when_flag_and_environment_are_given() -> None:
    assert binding_from_environment("flag-token", {BINDING_ENV: "env-token"}) == "flag-token"


def test_binding_from_environment_uses_environment_when_no_flag_is_given() -> None:
    assert binding_from_environment(None, {BINDING_ENV: "env-token"}) == "env-token"


def test_binding_from_environment_uses_environment_when_flag_is_empty() -> None:
    assert binding_from_environment("", {BINDING_ENV: "env-token"}) == "env-token"


@pytest.mark.parametrize("environ", [{}, {BINDING_ENV: ""}], ids=["unset", "empty"])
def test_binding_from_environment_is_none_when_neither_is_given(environ: dict[str, str]) -> None:
    assert binding_from_environment(None, environ) is None


def test_binding_from_environment_reads_process_environment_when_none_is_passed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(BINDING_ENV, "process-token")
    assert binding_from_environment(None) == "process-token"
    monkeypatch.delenv(BINDING_ENV)
    assert binding_from_environment(None) is None


def test_store_settings_keep_standbys_direct_url_and_unprepared_statements() -> None:
    settings = StoreSettings(
        store="postgresql://engram_owner@pooler/engram",
        read_urls=("postgresql://engram_owner@standby1/engram", "postgresql://engram_owner@standby2/engram"),
        direct_url="postgresql://engram_owner@primary/engram",
        prepared_statements=False,
    )
    assert parse_store_settings(settings.to_toml()) == settings
    assert parse_store_settings('store = "postgresql://o@h/db"\n') == StoreSettings(store="postgresql://o@h/db")


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ('store = "postgresql://o@h/db"\nread_urls = "postgresql://o@s/db"\n', "read_urls"),
        ('store = "postgresql://o@h/db"\nread_urls = ["mysql://o@s/db"]\n', "read_urls"),
        ('store = "postgresql://o@h/db"\ndirect_url = 5\n', "direct_url"),
        ('store = "postgresql://o@h/db"\nprepared_statements = "no"\n', "prepared_statements"),
        ('store = "sqlite"\nread_urls = ["postgresql://o@s/db"]\n', "PostgreSQL store only"),
    ],
)
def test_store_settings_refuse_replication_keys_that_cannot_be_used(text: str, named: str) -> None:
    with pytest.raises(SettingsError, match=named):
        parse_store_settings(text)
