"""Where the host's files live, read once from flags and the environment and passed down.

This is the only module that reads `ENGRAM_*` variables; everything else gets a `HostPaths`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

HOME_ENV = "ENGRAM_HOME"
BINDING_ENV = "ENGRAM_BINDING"
DEFAULT_HOME = Path("~/.local/share/engram-memory")
HOUSEKEEPING_INTERVAL_S = 60.0  # serve: seconds between automatic expiry and key sweeps


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
    def store_dir(self) -> Path:
        return self.home / "store"

    @property
    def sqlite_file(self) -> Path:
        return self.store_dir / "engram.db"

    @property
    def keys_dir(self) -> Path:
        return self.home / "keys"

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
