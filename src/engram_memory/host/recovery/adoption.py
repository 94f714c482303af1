"""What a restore takes over from the home an archive was made in, besides its store and data keys.

The digest secret (tombstones and audit digests are keyed by it), the host signing key (the archived
home's bindings keep verifying, and its revocations keep refusing them), the admission policy when
this home still has the default one, and the recovery key the restore was given, so the copy a person
keeps offline stays the one that opens this home's next archives. Each file is replaced atomically.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from engram_memory.host.keys.private_files import replace_private
from engram_memory.host.keys.recovery import RecoveryKey, RecoveryKeyError, install_recovery_key, load_recovery_key
from engram_memory.host.policy_file import DEFAULT_POLICY_TOML
from engram_memory.host.recovery.key_section import HomeFiles
from engram_memory.host.settings import HostPaths

POLICY_FROM_BACKUP = "policy.from-backup.toml"


@dataclass
class Adopted:
    """Which of this home's files the restore replaced with the archived home's."""

    replaced: list[str] = field(default_factory=list)
    policy_kept: Path | None = None  # this home's own policy was kept; the archive's was saved here


def adopt_home_files(paths: HostPaths, files: HomeFiles, recovery: RecoveryKey | None) -> Adopted:
    """Raises OSError when a file cannot be written."""
    adopted = Adopted()
    for path, data in ((paths.secret_file, files.secret_key), (paths.signing_key_file, files.signing_key_pem)):
        if _read(path) != data:
            replace_private(path, data)
            adopted.replaced.append(f"keys/{path.name}")
    if recovery is not None and _home_recovery_id(paths) != recovery.key_id:
        install_recovery_key(paths, recovery)
        adopted.replaced.append(f"keys/{paths.recovery_file.name}")
    current = _text(paths.policy)
    if current != files.policy_toml:
        if current in (None, DEFAULT_POLICY_TOML):
            paths.policy.write_text(files.policy_toml, encoding="utf-8")
            adopted.replaced.append(paths.policy.name)
        else:
            adopted.policy_kept = paths.home / POLICY_FROM_BACKUP
            adopted.policy_kept.write_text(files.policy_toml, encoding="utf-8")
    return adopted


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


def _text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def _home_recovery_id(paths: HostPaths) -> str | None:
    try:
        return load_recovery_key(paths).key_id
    except RecoveryKeyError:
        return None
