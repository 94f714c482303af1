"""The composition root: turns a host home into a running engine, and a fresh folder into a home.

The only place that knows which store, key ring, policy source and clock go together.
"""

from __future__ import annotations

import getpass
import os
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from engram_memory.contract.binding import Binding
from engram_memory.engine.clock import SystemClock
from engram_memory.engine.deps import Deps
from engram_memory.engine.engine import Engine
from engram_memory.host.bindings import BindingError, verify_binding
from engram_memory.host.keyfiles import create_key_files, load_keyring, load_mac_keys, load_signing_key
from engram_memory.host.policy_file import DEFAULT_POLICY_TOML, FilePolicySource
from engram_memory.host.settings import HostPaths
from engram_memory.stores.sqlite.store import SQLiteStore
from engram_memory.stores.sqlite.vault import SQLiteKeyVault

SQLITE_STORE = "sqlite"
CONFIG_TEMPLATE = '# engram-memory host configuration, written by `engram-memory init`.\nstore = "{store}"\n'


class HomeError(Exception):
    """The home is missing, half made, or configured for a store this build cannot open."""


@dataclass(frozen=True, slots=True)
class InitReport:
    created: list[Path]
    store: str


def init_home(paths: HostPaths, store: str | None = None) -> InitReport:
    """Idempotent: creates what is missing and never overwrites keys, policy or store."""
    wanted = store or SQLITE_STORE
    if wanted != SQLITE_STORE:
        raise HomeError("only the embedded store ('sqlite') is available in this version")
    created: list[Path] = []
    paths.home.mkdir(parents=True, exist_ok=True, mode=0o700)
    if paths.config.exists():
        existing = configured_store(paths)
        if store is not None and existing != wanted:
            raise HomeError(f"this home already uses the store '{existing}'")
    else:
        paths.config.write_text(CONFIG_TEMPLATE.format(store=wanted), encoding="utf-8")
        created.append(paths.config)
    if not paths.policy.exists():
        paths.policy.write_text(DEFAULT_POLICY_TOML, encoding="utf-8")
        created.append(paths.policy)
    _refuse_new_keys_for_old_data(paths)
    created.extend(create_key_files(paths))
    paths.store_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    for path in (paths.sqlite_file, paths.vault_file):
        if not path.exists():
            # SQLite gives its -wal and -shm files the main file's mode: create it private first.
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
            created.append(path)
    SQLiteStore(paths.sqlite_file).close()
    SQLiteKeyVault(paths.vault_file).close()
    return InitReport(created=created, store=wanted)


def _refuse_new_keys_for_old_data(paths: HostPaths) -> None:
    """A lost key file must be restored, not replaced: new keys would orphan every sealed body."""
    key_files = (paths.kek_file, paths.secret_file, paths.signing_key_file, paths.vault_file)
    missing = [path for path in key_files if not path.exists()]
    if not missing or not paths.sqlite_file.exists():
        return
    store = SQLiteStore(paths.sqlite_file)
    try:
        holds_data = store.holds_data()
    finally:
        store.close()
    if holds_data:
        raise HomeError(
            f"keys/{missing[0].name} is missing but the store already holds data: restore it from your "
            "key backup instead of making a new one"
        )


def configured_store(paths: HostPaths) -> str:
    try:
        config = tomllib.loads(paths.config.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:  # TOMLDecodeError and UnicodeDecodeError are ValueErrors
        raise HomeError(f"cannot read {paths.config}: run 'engram-memory init' first") from exc
    store = config.get("store")
    if store != SQLITE_STORE:
        raise HomeError("config.toml names a store this version cannot open")
    return SQLITE_STORE


@contextmanager
def open_engine(paths: HostPaths) -> Iterator[Engine]:
    """An engine over the home's store; the store is closed when the block ends."""
    configured_store(paths)
    if not paths.sqlite_file.exists():
        raise HomeError(f"no store in {paths.home}: run 'engram-memory init' first")
    if not paths.vault_file.exists():
        raise HomeError(f"no key vault in {paths.keys_dir}: restore keys/vault.db from your key backup")
    keyring = load_keyring(paths)
    macs = load_mac_keys(paths)
    store = SQLiteStore(paths.sqlite_file)
    vault = SQLiteKeyVault(paths.vault_file)
    try:
        deps = Deps(
            store=store,
            keyring=keyring,
            vault=vault,
            policies=FilePolicySource(paths.policy),
            clock=SystemClock(),
            cursor_key=macs.cursor,
            audit_key=macs.audit,
        )
        yield Engine(deps)
    finally:
        vault.close()
        store.close()


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
