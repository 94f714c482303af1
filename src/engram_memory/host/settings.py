"""Where the host's files live, read once from flags and the environment and passed down.

This is the only module that reads `ENGRAM_*` variables; everything else gets a `HostPaths`.
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engram_memory.host.language.catalogue import _

HOME_ENV = "ENGRAM_HOME"
BINDING_ENV = "ENGRAM_BINDING"
BINDING_FILE_ENV = "ENGRAM_BINDING_FILE"
DEFAULT_HOME = Path("~/.local/share/engram-memory")
HOUSEKEEPING_INTERVAL_S = 60.0  # serve: seconds between automatic expiry and key sweeps
SQLITE_STORE = "sqlite"
POSTGRES_SCHEMES = ("postgresql://", "postgres://")
DEFAULT_POOL_SIZE = 4
MAX_POOL_SIZE = 100


@dataclass(frozen=True, slots=True)
class HostPaths:
    home: Path

    @property
    def config(self) -> Path:
        return self.home / "config.toml"

    @property
    def policy(self) -> Path:
        return self.home / "policy.toml"

    @property
    def access(self) -> Path:
        return self.home / "access.toml"

    @property
    def tenants(self) -> Path:
        """Which cluster each tenant lives in (host/tenant_routes.py); absent: every tenant at home."""
        return self.home / "tenants.toml"

    @property
    def store_dir(self) -> Path:
        return self.home / "store"

    @property
    def sqlite_file(self) -> Path:
        return self.store_dir / "engram.db"

    @property
    def keys_dir(self) -> Path:
        return self.home / "keys"

    @property
    def vectors_dir(self) -> Path:
        """Large scopes' vector files, shared by the host's processes (derived data: safe to delete)."""
        return self.home / "vectors"

    @property
    def kek_file(self) -> Path:
        return self.keys_dir / "kek.json"

    @property
    def secret_file(self) -> Path:
        return self.keys_dir / "secret.key"

    @property
    def vault_file(self) -> Path:
        return self.keys_dir / "vault.db"

    @property
    def signing_key_file(self) -> Path:
        return self.keys_dir / "host-signing.pem"

    @property
    def recovery_file(self) -> Path:
        return self.keys_dir / "recovery.key"


def resolve_home(flag: Path | None, environ: Mapping[str, str] | None = None) -> HostPaths:
    """`--home` wins over `ENGRAM_HOME`, which wins over the default."""
    env = os.environ if environ is None else environ
    if flag is not None:
        home = flag
    elif env.get(HOME_ENV):
        home = Path(env[HOME_ENV])
    else:
        home = DEFAULT_HOME
    return HostPaths(home=home.expanduser().absolute())


def binding_from_environment(flag: str | None, environ: Mapping[str, str] | None = None) -> str | None:
    env = os.environ if environ is None else environ
    return flag if flag else env.get(BINDING_ENV) or None


class SettingsError(ValueError):
    """config.toml names something this version cannot use (a one-line reason)."""


EMBEDDING_MODEL_ENV = "ENGRAM_EMBEDDING_MODEL"


def embedding_model_from_environment(environ: Mapping[str, str] | None = None) -> str:
    """Which embedding model the operator asked for: an id, "off", or "" for the first one installed."""
    env = os.environ if environ is None else environ
    return env.get(EMBEDDING_MODEL_ENV, "").strip()


MODEL_CACHE_ENV = "ENGRAM_MODEL_CACHE"


def model_cache_from_environment(environ: Mapping[str, str] | None = None) -> Path | None:
    """Where the operator wants the model's derived integer graph kept; None: the embeddings' default
    (embeddings/quantize.cache_folder)."""
    env = os.environ if environ is None else environ
    explicit = env.get(MODEL_CACHE_ENV, "").strip()
    return Path(explicit) if explicit else None


def is_postgres_url(value: str) -> bool:
    return value.startswith(POSTGRES_SCHEMES)


def optional_postgres_url(value: object, where: str) -> str | None:
    """A setting that is absent or a postgresql:// URL. Raises SettingsError naming `where`."""
    if value is not None and (not isinstance(value, str) or not is_postgres_url(value)):
        raise SettingsError(_("{where} must be a postgresql:// URL").format(where=where))
    return value


def postgres_urls(value: object, where: str) -> tuple[str, ...]:
    """A setting that is a list of postgresql:// URLs. Raises SettingsError naming `where`."""
    if not isinstance(value, list) or not all(isinstance(url, str) and is_postgres_url(url) for url in value):
        raise SettingsError(_("{where} must be a list of postgresql:// URLs").format(where=where))
    return tuple(value)


@dataclass(frozen=True, slots=True)
class StoreSettings:
    """Which store and key vault a home uses, as config.toml records them.

    `store` is "sqlite" (the embedded file in the home) or a postgresql:// URL of the owner role;
    `vault` is None (keys/vault.db) or a postgresql:// URL of a database of its own; `app_role` is
    the role agent calls run as on PostgreSQL (row-level security applies to it, not to the owner).
    `read_urls` name hot standbys that answer searches and gets; `direct_url` reaches the primary
    without a connection pooler, for the owner's work a pooler in transaction mode cannot carry
    (migrations, VACUUM); `prepared_statements = false` keeps statements unprepared on the server, as
    a pooler without prepared-statement support needs. Passwords never go in these URLs: libpq reads
    them from ~/.pgpass, PGPASSFILE or PGPASSWORD.
    """

    store: str = SQLITE_STORE
    app_role: str | None = None
    vault: str | None = None
    pool_size: int = DEFAULT_POOL_SIZE
    read_urls: tuple[str, ...] = ()
    direct_url: str | None = None
    prepared_statements: bool = True

    @property
    def is_postgres(self) -> bool:
        return is_postgres_url(self.store)

    def to_toml(self) -> str:
        lines = [
            "# engram-memory host configuration, written by `engram-memory init`.",
            f"store = {toml_string(self.store)}",
        ]
        if self.app_role is not None:
            lines.append(f"app_role = {toml_string(self.app_role)}")
        if self.vault is not None:
            lines.append(f"vault = {toml_string(self.vault)}")
        if self.is_postgres:
            lines.append(f"pool_size = {self.pool_size}")
        if self.read_urls:
            lines.append(f"read_urls = [{', '.join(toml_string(url) for url in self.read_urls)}]")
        if self.direct_url is not None:
            lines.append(f"direct_url = {toml_string(self.direct_url)}")
        if not self.prepared_statements:
            lines.append("prepared_statements = false")
        return "\n".join(lines) + "\n"


def toml_string(value: str) -> str:
    """A TOML basic string (JSON's escapes are TOML's)."""
    return json.dumps(value)


def parse_store_settings(text: str) -> StoreSettings:
    """Raises SettingsError naming what is wrong, and tomllib.TOMLDecodeError for text that is not TOML."""
    config: dict[str, Any] = tomllib.loads(text)
    store = config.get("store")
    if not isinstance(store, str) or not (store == SQLITE_STORE or is_postgres_url(store)):
        raise SettingsError(_("config.toml names a store this version cannot open"))
    app_role, vault, pool_size = config.get("app_role"), config.get("vault"), config.get("pool_size", DEFAULT_POOL_SIZE)
    if app_role is not None and (not isinstance(app_role, str) or not app_role):
        raise SettingsError(_("config.toml: app_role must be a role name"))
    if vault is not None and (not isinstance(vault, str) or not is_postgres_url(vault)):
        raise SettingsError(_("config.toml: vault must be a postgresql:// URL"))
    if not isinstance(pool_size, int) or isinstance(pool_size, bool) or not 1 <= pool_size <= MAX_POOL_SIZE:
        raise SettingsError(
            _("config.toml: pool_size must be a whole number from 1 to {max_pool_size}").format(
                max_pool_size=MAX_POOL_SIZE
            )
        )
    if store == SQLITE_STORE and (app_role is not None or vault is not None):
        raise SettingsError(_("config.toml: app_role and vault apply to a PostgreSQL store only"))
    read_urls = postgres_urls(config.get("read_urls", []), "config.toml: read_urls")
    direct_url = optional_postgres_url(config.get("direct_url"), "config.toml: direct_url")
    prepared = config.get("prepared_statements", True)
    if not isinstance(prepared, bool):
        raise SettingsError(_("config.toml: prepared_statements must be true or false"))
    if store == SQLITE_STORE and (read_urls or direct_url is not None or not prepared):
        raise SettingsError(
            _("config.toml: read_urls, direct_url and prepared_statements apply to a PostgreSQL store only")
        )
    return StoreSettings(
        store=store,
        app_role=app_role,
        vault=vault,
        pool_size=pool_size,
        read_urls=read_urls,
        direct_url=direct_url,
        prepared_statements=prepared,
    )


class HomeError(Exception):
    """The home is missing, half made, or configured for a store this build cannot open."""


def store_settings(paths: HostPaths) -> StoreSettings:
    """The home's config.toml, read now (a test or an operator may have changed it). Raises HomeError."""
    try:
        text = paths.config.read_text(encoding="utf-8")
        return parse_store_settings(text)
    except SettingsError as exc:
        raise HomeError(str(exc)) from exc
    except (OSError, ValueError) as exc:  # TOMLDecodeError and UnicodeDecodeError are ValueErrors
        raise HomeError(_("cannot read {config}: run 'engram-memory init' first").format(config=paths.config)) from exc
