"""The composition root: turns a host home into a running engine, and a fresh folder into a home.

The only place that knows which store, key vault, key ring, policy source and clock go together:
the embedded SQLite store in the home, or a PostgreSQL store (host/postgres_home.py) opened as the
owner role for the host's commands or as the runtime role (`runtime=True`) for agent calls.
"""

from __future__ import annotations

import getpass
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from engram_memory.contract.binding import Binding
from engram_memory.contract.errors import ContractError
from engram_memory.embeddings.loader import EmbedderUnavailable, load_embedder
from engram_memory.engine.clock import SystemClock
from engram_memory.engine.deps import Deps
from engram_memory.engine.engine import Engine
from engram_memory.engine.ports.store import Store
from engram_memory.engine.recall.indexer import VectorIndexer
from engram_memory.engine.recall.semantic import VectorCache
from engram_memory.host import postgres_home
from engram_memory.host.bindings import BindingError, verify_binding
from engram_memory.host.keys.files import create_key_files, load_keyring, load_mac_keys, load_signing_key
from engram_memory.host.policy_file import DEFAULT_POLICY_TOML, FilePolicySource
from engram_memory.host.postgres_home import PostgresHomeError
from engram_memory.host.settings import (
    SQLITE_STORE,
    HostPaths,
    SettingsError,
    StoreSettings,
    embedding_model_from_environment,
    is_postgres_url,
    parse_store_settings,
    toml_string,
)
from engram_memory.stores.sql.vault import HostKeyVault, VaultCounts
from engram_memory.stores.sqlite.store import SQLiteStore
from engram_memory.stores.sqlite.vault import SQLiteKeyVault
from engram_memory.stores.sqlite.vault import vault_counts as sqlite_vault_counts

if TYPE_CHECKING:
    from engram_memory.stores.postgres.store import PostgresStore

POSTGRES_STORE = "postgresql"


class HomeError(Exception):
    """The home is missing, half made, or configured for a store this build cannot open."""


@dataclass(frozen=True, slots=True)
class InitReport:
    created: list[Path]
    store: str
    app_role: str | None = None
    vault: str | None = None


# -- init ------------------------------------------------------------------------------------------


def init_home(
    paths: HostPaths, store: str | None = None, *, app_role: str | None = None, vault: str | None = None
) -> InitReport:
    """Idempotent: creates what is missing and never overwrites keys, policy or store.

    A PostgreSQL store is checked (reachable as an owner that bypasses row-level security, runtime
    role safe, vault database apart) before any file is written, then migrated and granted.
    """
    settings = _wanted_settings(paths, store, app_role, vault)
    if settings.is_postgres:
        try:
            postgres_home.prepare(settings)
        except PostgresHomeError as exc:
            raise HomeError(str(exc)) from exc
    created: list[Path] = []
    paths.home.mkdir(parents=True, exist_ok=True, mode=0o700)
    if not paths.config.exists():
        paths.config.write_text(settings.to_toml(), encoding="utf-8")
        created.append(paths.config)
    elif store_settings(paths).app_role != settings.app_role and settings.app_role is not None:
        _add_app_role(paths, settings.app_role)
    if not paths.policy.exists():
        paths.policy.write_text(DEFAULT_POLICY_TOML, encoding="utf-8")
        created.append(paths.policy)
    _refuse_new_keys_for_old_data(paths, settings)
    created.extend(create_key_files(paths))
    if settings.is_postgres:
        _init_postgres(paths, settings, created)
    else:
        _init_sqlite(paths, created)
    return InitReport(created=created, store=settings.store, app_role=settings.app_role, vault=settings.vault)


def _wanted_settings(paths: HostPaths, store: str | None, app_role: str | None, vault: str | None) -> StoreSettings:
    """What the home should use: its config.toml, with what this init adds; conflicts are refused."""
    if store is not None and store != SQLITE_STORE and not is_postgres_url(store):
        raise HomeError("--store takes 'sqlite' or a postgresql:// URL")
    for value, option in ((store, "--store"), (vault, "--vault")):
        if value is not None and is_postgres_url(value):
            try:
                postgres_home.check_url(value, option)
            except PostgresHomeError as exc:
                raise HomeError(str(exc)) from exc
    if paths.config.exists():
        current = store_settings(paths)
        if store is not None and store != current.store:
            raise HomeError(f"this home already uses the store '{_shown(current.store)}'")
    else:
        current = StoreSettings(store=store or SQLITE_STORE)
    if not current.is_postgres and (app_role is not None or vault is not None):
        raise HomeError("--app-role and --vault apply to a PostgreSQL store only")
    if app_role is not None and current.app_role not in (None, app_role):
        raise HomeError(f"this home's runtime role is already '{current.app_role}'")
    if vault is not None and current.vault not in (None, vault):
        raise HomeError("this home's key vault is already another database")
    if vault is not None and current.vault is None and paths.config.exists():
        raise HomeError("this home keeps its data keys in keys/vault.db: a vault database cannot be added later")
    return replace(current, app_role=app_role or current.app_role, vault=vault or current.vault)


def _add_app_role(paths: HostPaths, app_role: str) -> None:
    """Records a runtime role added to an existing home, right after its store line (other settings kept)."""
    lines = paths.config.read_text(encoding="utf-8").splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if line.lstrip().startswith("store"))
    lines.insert(at + 1, f"app_role = {toml_string(app_role)}\n")
    paths.config.write_text("".join(lines), encoding="utf-8")


def _shown(store: str) -> str:
    return store if store == SQLITE_STORE else POSTGRES_STORE


def _init_sqlite(paths: HostPaths, created: list[Path]) -> None:
    paths.store_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    for path in (paths.sqlite_file, paths.vault_file):
        _create_private(path, created)
    SQLiteStore(paths.sqlite_file).close()
    SQLiteKeyVault(paths.vault_file).close()


def _init_postgres(paths: HostPaths, settings: StoreSettings, created: list[Path]) -> None:
    if settings.vault is None:
        _create_private(paths.vault_file, created)
        SQLiteKeyVault(paths.vault_file).close()
    try:
        postgres_home.install(settings)
    except PostgresHomeError as exc:
        raise HomeError(str(exc)) from exc


def _create_private(path: Path, created: list[Path]) -> None:
    if not path.exists():
        # SQLite gives its -wal and -shm files the main file's mode: create it private first.
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        created.append(path)


def _refuse_new_keys_for_old_data(paths: HostPaths, settings: StoreSettings) -> None:
    """A lost key file must be restored, not replaced: new keys would orphan every sealed body."""
    key_files = [paths.kek_file, paths.secret_file, paths.signing_key_file]
    if settings.vault is None:
        key_files.append(paths.vault_file)
    missing = [path for path in key_files if not path.exists()]
    if not missing:
        return
    store: PostgresStore | SQLiteStore
    if settings.is_postgres:
        store = _open_postgres_store(settings, runtime=False)
    elif paths.sqlite_file.exists():
        store = SQLiteStore(paths.sqlite_file)
    else:
        return
    try:
        holds_data = store.holds_data()
    finally:
        store.close()
    if holds_data:
        raise HomeError(
            f"keys/{missing[0].name} is missing but the store already holds data: restore it from your "
            "key backup instead of making a new one"
        )


# -- reading a home --------------------------------------------------------------------------------


def store_settings(paths: HostPaths) -> StoreSettings:
    try:
        text = paths.config.read_text(encoding="utf-8")
        return parse_store_settings(text)
    except SettingsError as exc:
        raise HomeError(str(exc)) from exc
    except (OSError, ValueError) as exc:  # TOMLDecodeError and UnicodeDecodeError are ValueErrors
        raise HomeError(f"cannot read {paths.config}: run 'engram-memory init' first") from exc


def configured_store(paths: HostPaths) -> str:
    """ "sqlite" or "postgresql": which kind of store the home's config.toml names."""
    return POSTGRES_STORE if store_settings(paths).is_postgres else SQLITE_STORE


@contextmanager
def _postgres_home_errors() -> Iterator[None]:
    """A role or URL problem, or a schema older than this version, as the one-line HomeError of a host command."""
    try:
        yield
    except PostgresHomeError as exc:
        raise HomeError(str(exc)) from exc
    except ContractError as exc:
        if postgres_home.schema_behind(exc):
            raise HomeError(_BEHIND) from exc
        raise


def _open_postgres_store(settings: StoreSettings, *, runtime: bool) -> PostgresStore:
    from engram_memory.stores.postgres.store import PostgresStore

    with _postgres_home_errors():
        url = postgres_home.runtime_url(settings, settings.store) if runtime else settings.store
        return PostgresStore(url, pool_size=settings.pool_size, run_migrations=not runtime)


_BEHIND = "the PostgreSQL schema is older than this version: run 'engram-memory init' (as the owner) first"


def vector_cache() -> VectorCache | None:
    """A semantic channel for one engine: the process's model (loaded once) and a matrix cache of its own.

    Each engine keeps its own cache because a cache is only valid for the store it was filled from.
    """
    try:
        embedder = load_embedder(embedding_model_from_environment())
    except EmbedderUnavailable as exc:
        raise HomeError(str(exc)) from exc
    return None if embedder is None else VectorCache(embedder)


def open_store(paths: HostPaths, *, runtime: bool = False) -> Store:
    """The home's store, opened as the owner (migrating what is missing) or as the runtime role.

    Raises HomeError, ContractError STORE_UNAVAILABLE or MIGRATION_LEDGER_INVALID.
    """
    settings = store_settings(paths)
    if settings.is_postgres:
        return _open_postgres_store(settings, runtime=runtime)
    if not paths.sqlite_file.exists():
        raise HomeError(f"no store in {paths.home}: run 'engram-memory init' first")
    return SQLiteStore(paths.sqlite_file)


def open_postgres_store(paths: HostPaths) -> PostgresStore:
    """The home's PostgreSQL store as the owner, for the host's whole-store work (backup, restore).

    Raises HomeError (not a PostgreSQL home, schema behind), ContractError STORE_UNAVAILABLE.
    """
    settings = store_settings(paths)
    if not settings.is_postgres:
        raise HomeError("this home's store is not PostgreSQL")
    return _open_postgres_store(settings, runtime=False)


def open_vault(paths: HostPaths, *, runtime: bool = False) -> HostKeyVault:
    """The home's key vault: keys/vault.db, or its own PostgreSQL database.

    Raises HomeError, ContractError STORE_UNAVAILABLE or MIGRATION_LEDGER_INVALID.
    """
    settings = store_settings(paths)
    if settings.vault is None:
        if not paths.vault_file.exists():
            raise HomeError(f"no key vault in {paths.keys_dir}: restore keys/vault.db from your key backup")
        return SQLiteKeyVault(paths.vault_file)
    from engram_memory.stores.postgres.vault import PostgresKeyVault

    with _postgres_home_errors():
        url = postgres_home.runtime_url(settings, settings.vault) if runtime else settings.vault
        return PostgresKeyVault(url, pool_size=settings.pool_size, run_migrations=not runtime)


@contextmanager
def serving_engines(paths: HostPaths) -> Iterator[tuple[Engine, Engine]]:
    """(agents, owner): agent calls through the runtime role, housekeeping and checks as the owner.

    On SQLite both are the same engine: there is no role to separate.
    """
    if not store_settings(paths).is_postgres:
        with open_engine(paths) as engine:
            yield engine, engine
        return
    with open_engine(paths) as owner, open_engine(paths, runtime=True) as agents:
        yield agents, owner


@contextmanager
def open_engine(paths: HostPaths, *, runtime: bool = False, semantic: bool | None = None) -> Iterator[Engine]:
    """An engine over the home's store; the store is closed when the block ends.

    `semantic`: None ranks with the embedding model when the semantic extra is installed (the default
    profile), False ranks lexically only, True asks for the model (the engine has none if it is missing).

    `runtime=True` is for serving agent calls: on PostgreSQL it connects as the home's runtime role,
    which row-level security confines to the tenant of each call (the host's commands, housekeeping
    and verification need the owner: runtime=False). On SQLite it changes nothing.
    """
    settings = store_settings(paths)
    if not settings.is_postgres and not paths.sqlite_file.exists():
        raise HomeError(f"no store in {paths.home}: run 'engram-memory init' first")
    if settings.vault is None and not paths.vault_file.exists():
        raise HomeError(f"no key vault in {paths.keys_dir}: restore keys/vault.db from your key backup")
    keyring = load_keyring(paths)
    macs = load_mac_keys(paths)
    store = open_store(paths, runtime=runtime)
    try:
        vault = open_vault(paths, runtime=runtime)
    except BaseException:
        store.close()
        raise
    indexer: VectorIndexer | None = None
    try:
        cache = None if semantic is False else vector_cache()
        indexer = None if cache is None else VectorIndexer(store, cache)
        deps = Deps(
            store=store,
            keyring=keyring,
            vault=vault,
            policies=FilePolicySource(paths.policy),
            clock=SystemClock(),
            cursor_key=macs.cursor,
            audit_key=macs.audit,
            semantic=cache,
            indexer=indexer,
        )
        yield Engine(deps)
    finally:
        if indexer is not None:
            indexer.close()
        vault.close()
        store.close()


# -- what the host's statistics read besides the store -----------------------------------------------


def vault_counts(paths: HostPaths) -> VaultCounts:
    """Keys held and destroyed. Raises ContractError STORE_UNAVAILABLE, HomeError."""
    settings = store_settings(paths)
    if settings.vault is None:
        return sqlite_vault_counts(paths.vault_file)
    vault = open_vault(paths)
    try:
        return vault.counts()
    finally:
        vault.close()


def storage_sizes(paths: HostPaths) -> dict[str, int]:
    """Bytes on disk: the SQLite files of the home, or the PostgreSQL databases' sizes (0 when unknown)."""
    settings = store_settings(paths)
    sizes: dict[str, int] = {}
    if settings.is_postgres:
        sizes["store_database_bytes"] = _database_bytes(settings.store)
    else:
        sizes["store_bytes"] = _file_size(paths.sqlite_file)
        sizes["store_wal_bytes"] = _file_size(paths.sqlite_file.with_name(paths.sqlite_file.name + "-wal"))
    if settings.vault is not None:
        sizes["vault_database_bytes"] = _database_bytes(settings.vault)
    else:
        sizes["vault_bytes"] = _file_size(paths.vault_file)
        sizes["vault_wal_bytes"] = _file_size(paths.vault_file.with_name(paths.vault_file.name + "-wal"))
    return sizes


def _file_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _database_bytes(url: str) -> int:
    import psycopg

    from engram_memory.stores.postgres.connection import database_bytes

    try:
        return database_bytes(url)
    except psycopg.Error:
        return 0


# -- bindings and people ---------------------------------------------------------------------------


def verify_token(paths: HostPaths, token: str | None) -> tuple[Binding | None, str | None]:
    """The verified binding, or None with the reason memory tools stay off."""
    if not token:
        return None, "no binding given (--binding or ENGRAM_BINDING): memory tools are off"
    try:
        return verify_binding(load_signing_key(paths).public_key(), token.strip()), None
    except BindingError as exc:
        return None, f"{exc}: memory tools are off"


def current_user() -> str:
    """Who decided, as the host's audit trail names them."""
    try:
        return "host:" + getpass.getuser()
    except (KeyError, OSError):
        return "host:unknown"


__all__ = [
    "POSTGRES_STORE",
    "SQLITE_STORE",
    "HomeError",
    "InitReport",
    "configured_store",
    "current_user",
    "init_home",
    "open_engine",
    "open_postgres_store",
    "open_store",
    "open_vault",
    "storage_sizes",
    "store_settings",
    "vault_counts",
    "verify_token",
]
