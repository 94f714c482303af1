"""The composition root: turns a host home into a running engine, and a fresh folder into a home.

The only place that knows which store, key vault, key ring, policy source and clock go together:
the embedded SQLite store in the home, or a PostgreSQL store (host/postgres_home.py) opened as the
owner role for the host's commands or as the runtime role (`runtime=True`) for agent calls.
"""

from __future__ import annotations

import getpass
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from engram_memory.contract.binding import Binding
from engram_memory.embeddings.loader import EmbedderUnavailable, load_model
from engram_memory.engine.clock import SystemClock
from engram_memory.engine.engine import Engine
from engram_memory.engine.ports.host_vault import HostKeyVault, VaultCounts
from engram_memory.engine.ports.store import Clock, KeyVault, Store
from engram_memory.engine.recall.indexer import VectorIndexer
from engram_memory.engine.recall.semantic import VectorCache
from engram_memory.engine.recall.shared_builds import SharedBases
from engram_memory.engine.recall.shared_index import BaseFiles
from engram_memory.engine.recall.shared_index import available as shared_files_available
from engram_memory.host.backends import (
    POSTGRES_STORE,
    StoreBackend,
    VaultBackend,
    store_backend,
    vault_backend,
    wanted_settings,
)
from engram_memory.host.bindings import BindingError, verify_binding
from engram_memory.host.keys.files import (
    MacKeys,
    create_key_files,
    load_keyring,
    load_mac_keys,
    load_signing_key,
)
from engram_memory.host.language.catalogue import _
from engram_memory.host.policy_file import DEFAULT_POLICY_TOML, FilePolicySource
from engram_memory.host.routed_engines import Serving, routed_serving
from engram_memory.host.settings import (
    SQLITE_STORE,
    HomeError,
    HostPaths,
    SettingsError,
    StoreSettings,
    embedding_model_from_environment,
    model_cache_from_environment,
    parse_store_settings,
    store_settings,
    toml_string,
)
from engram_memory.host.tenant_routes import HOME_CLUSTER, RoutesWatcher, home_routes


@dataclass(frozen=True, slots=True)
class InitReport:
    created: list[Path]
    store: str
    app_role: str | None = None
    vault: str | None = None


# -- init ------------------------------------------------------------------------------------------


def init_home(
    paths: HostPaths,
    store: str | None = None,
    *,
    app_role: str | None = None,
    vault: str | None = None,
    read_urls: Sequence[str] | None = None,
    direct_url: str | None = None,
) -> InitReport:
    """Idempotent: creates what is missing and never overwrites keys, policy or store.

    A PostgreSQL store is checked (reachable as an owner that bypasses row-level security, runtime
    role safe, vault database apart) before any file is written, then migrated and granted. `read_urls`
    and `direct_url` (the standbys, the primary past a pooler) replace what config.toml said.
    """
    settings = wanted_settings(paths, store, app_role, vault, read_urls=read_urls, direct_url=direct_url)
    backend, vault_kind = store_backend(paths, settings), vault_backend(paths, settings)
    backend.prepare()
    created: list[Path] = []
    paths.home.mkdir(parents=True, exist_ok=True, mode=0o700)
    if not paths.config.exists():
        paths.config.write_text(settings.to_toml(), encoding="utf-8")
        created.append(paths.config)
    elif (read_urls is not None or direct_url is not None) and store_settings(paths) != settings:
        _set_replicas(paths, settings)
    elif store_settings(paths).app_role != settings.app_role and settings.app_role is not None:
        _add_app_role(paths, settings.app_role)
    if not paths.policy.exists():
        paths.policy.write_text(DEFAULT_POLICY_TOML, encoding="utf-8")
        created.append(paths.policy)
    _refuse_new_keys_for_old_data(paths, backend, vault_kind)
    created.extend(create_key_files(paths))
    backend.install(created)
    vault_kind.install(created)
    return InitReport(created=created, store=settings.store, app_role=settings.app_role, vault=settings.vault)


def _set_replicas(paths: HostPaths, settings: StoreSettings) -> None:
    """Writes the standbys and the direct URL right after the store line, in place of what was there
    (other settings and tables kept). Raises HomeError when the file was edited past what a line can say."""
    top = paths.config.read_text(encoding="utf-8").splitlines(keepends=True)
    end = next((i for i, line in enumerate(top) if line.lstrip().startswith("[")), len(top))
    keep = [line for line in top[:end] if line.split("=", 1)[0].strip() not in ("read_urls", "direct_url")]
    at = next(i for i, line in enumerate(keep) if line.lstrip().startswith("store"))
    added = [line + "\n" for line in settings.to_toml().splitlines() if line.startswith(("read_urls", "direct_url"))]
    text = "".join(keep[: at + 1] + added + keep[at + 1 :] + top[end:])
    try:
        written = parse_store_settings(text)
    except ValueError as exc:
        raise HomeError(
            _("{config} spreads read_urls over several lines: set them there by hand").format(config=paths.config)
        ) from exc
    if written != settings:
        raise HomeError(
            _("{config} spreads read_urls over several lines: set them there by hand").format(config=paths.config)
        )
    paths.config.write_text(text, encoding="utf-8")


def _add_app_role(paths: HostPaths, app_role: str) -> None:
    """Records a runtime role added to an existing home, right after its store line (other settings kept)."""
    lines = paths.config.read_text(encoding="utf-8").splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if line.lstrip().startswith("store"))
    lines.insert(at + 1, f"app_role = {toml_string(app_role)}\n")
    paths.config.write_text("".join(lines), encoding="utf-8")


def _refuse_new_keys_for_old_data(paths: HostPaths, backend: StoreBackend, vault: VaultBackend) -> None:
    """A lost key file must be restored, not replaced: new keys would orphan every sealed body."""
    key_files = [paths.kek_file, paths.secret_file, paths.signing_key_file, *vault.needed_files()]
    missing = [path for path in key_files if not path.exists()]
    if missing and backend.holds_data():
        raise HomeError(
            _(
                "keys/{name} is missing but the store already holds data: restore it from your key backup instead of "
                "making a new one"
            ).format(name=missing[0].name)
        )


# -- reading a home --------------------------------------------------------------------------------


def configured_store(paths: HostPaths) -> str:
    """ "sqlite" or "postgresql": which kind of store the home's config.toml names."""
    return store_backend(paths).kind


def vector_cache(paths: HostPaths | None = None) -> VectorCache | None:
    """A semantic channel for one engine: the process's model (loaded once) and a matrix cache of its own,
    with the home's shared files for large scopes (`paths`; none for a store that is not the home's yet).

    Each engine keeps its own cache because a cache is only valid for the store it was filled from.
    """
    try:
        model = load_model(embedding_model_from_environment(), model_cache_from_environment())
    except EmbedderUnavailable as exc:
        raise HomeError(str(exc)) from exc
    if model is None:
        return None
    shared = SharedBases(BaseFiles(paths.vectors_dir)) if paths is not None and shared_files_available() else None
    return VectorCache(model, shared)


def open_store(paths: HostPaths, *, runtime: bool = False) -> Store:
    """The home's store, opened as the owner (migrating what is missing) or as the runtime role.

    Raises HomeError, ContractError STORE_UNAVAILABLE or MIGRATION_LEDGER_INVALID.
    """
    return store_backend(paths).open(runtime=runtime)


def open_vault(paths: HostPaths, *, runtime: bool = False) -> HostKeyVault:
    """The home's key vault: keys/vault.db, or its own PostgreSQL database.

    Raises HomeError, ContractError STORE_UNAVAILABLE or MIGRATION_LEDGER_INVALID.
    """
    return vault_backend(paths).open(runtime=runtime)


@contextmanager
def serving_engines(paths: HostPaths) -> Iterator[Serving]:
    """Agent calls through the runtime role; housekeeping and checks as the owner. On SQLite both are the
    same engine: there is no role to separate. A home whose tenants.toml names clusters gets a pair per
    cluster, each call answered by its tenant's (host/routed_engines.py). Raises HomeError."""
    if not store_backend(paths).runtime_role:
        if paths.tenants.exists():
            raise HomeError(_("tenants.toml applies to a PostgreSQL home only"))
        with open_engine(paths) as engine:
            yield Serving(engine, engine, [engine])
        return
    routes = home_routes(paths)
    if routes.clusters:
        watcher = RoutesWatcher(paths, routes)
        with routed_serving(watcher, routes.names(), partial(open_engine, paths)) as serving:
            yield serving
        return
    with open_engine(paths) as owner, open_engine(paths, runtime=True) as agents:
        yield Serving(agents, owner, [owner])


@contextmanager
def open_engine(
    paths: HostPaths,
    *,
    runtime: bool = False,
    semantic: bool | None = None,
    cluster: str = HOME_CLUSTER,
    clock: Clock | None = None,
) -> Iterator[Engine]:
    """An engine over the home's store (or over another cluster's of tenants.toml, with the home's keys);
    the store is closed when the block ends.

    `semantic`: None ranks with the embedding model when the semantic extra is installed (the default
    profile), False ranks lexically only, True asks for the model (the engine has none if it is missing).

    `clock` is the system's unless a test gives its own.

    `runtime=True` is for serving agent calls: on PostgreSQL it connects as the home's runtime role,
    which row-level security confines to the tenant of each call (the host's commands, housekeeping
    and verification need the owner: runtime=False). On SQLite it changes nothing.
    """
    settings = store_settings(paths)
    if cluster != HOME_CLUSTER:
        try:
            settings = home_routes(paths).settings_for(settings, cluster)
        except SettingsError as exc:
            raise HomeError(str(exc)) from exc
    backend, vault_kind = store_backend(paths, settings), vault_backend(paths, settings)
    backend.require()
    if any(not needed.exists() for needed in vault_kind.needed_files()):
        raise HomeError(
            _("no key vault in {keys_dir}: restore keys/vault.db from your key backup").format(keys_dir=paths.keys_dir)
        )
    keyring = load_keyring(paths)
    macs = load_mac_keys(paths)
    store = backend.open(runtime=runtime)
    try:
        vault = vault_kind.open(runtime=runtime)
    except BaseException:
        store.close()
        raise
    indexer: VectorIndexer | None = None
    try:
        cache = None if semantic is False else vector_cache(paths)
        indexer = None if cache is None else VectorIndexer(store, cache)
        yield Engine.assemble(
            store=store,
            keyring=keyring,
            vault=vault,
            policies=FilePolicySource(paths.policy),
            clock=clock or SystemClock(),
            cursor_key=macs.cursor,
            audit_key=macs.audit,
            semantic=cache,
            indexer=indexer,
        )
    finally:
        if indexer is not None:
            indexer.close()
        vault.close()
        store.close()


def working_engine(
    paths: HostPaths, store: Store, vault: KeyVault, clock: Clock, macs: MacKeys | None = None
) -> Engine:
    """An engine over a store that is not the home's yet (a restore's working copy), with the home's key
    ring and its digest keys (or `macs`, those of the home an archive comes from).

    Vectors are embedded inline (no indexer thread): the copy is verified whole before it is written.
    """
    macs = macs or load_mac_keys(paths)
    return Engine.assemble(
        store=store,
        keyring=load_keyring(paths),
        vault=vault,
        policies=FilePolicySource(paths.policy),
        clock=clock,
        cursor_key=macs.cursor,
        audit_key=macs.audit,
        semantic=vector_cache(),
    )


# -- what the host's statistics read besides the store -----------------------------------------------


def vault_counts(paths: HostPaths) -> VaultCounts:
    """Keys held and destroyed. Raises ContractError STORE_UNAVAILABLE, HomeError."""
    return vault_backend(paths).counts()


def storage_sizes(paths: HostPaths) -> dict[str, int]:
    """Bytes on disk: the SQLite files of the home, or the PostgreSQL databases' sizes (0 when unknown)."""
    settings = store_settings(paths)
    return {**store_backend(paths, settings).sizes(), **vault_backend(paths, settings).sizes()}


# -- bindings and people ---------------------------------------------------------------------------


# Ends every reason verify_token gives; what comes before it is the reason alone.
def verify_token(paths: HostPaths, token: str | None) -> tuple[Binding | None, str | None]:
    """The verified binding (expired or not), or None with the reason there is none."""
    if not token:
        return None, "no binding given (--binding, --binding-file or ENGRAM_BINDING)"
    try:
        return verify_binding(load_signing_key(paths).public_key(), token.strip()), None
    except BindingError as exc:
        return None, str(exc)


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
    "open_store",
    "open_vault",
    "storage_sizes",
    "store_settings",
    "vault_counts",
    "verify_token",
]
