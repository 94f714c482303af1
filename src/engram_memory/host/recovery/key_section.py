"""What an archive carries besides the store, so that its recovery key alone restores it anywhere.

The data keys of the archived bodies, unwrapped from the home's key-encryption keys and wrapped again
(RFC 3394) under a key derived from the recovery key and the archive's salt; the vault's logs as of
the backup (destroyed keys, revocations, issued bindings); and the home's digest secret, host signing
key and admission policy, without which restored tombstones, bindings and admissions would not hold.
All of it sits inside the archive's authenticated encryption, as one JSON document.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Collection
from dataclasses import asdict, dataclass
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.keywrap import InvalidUnwrap, aes_key_unwrap, aes_key_wrap

from engram_memory.contract.errors import ContractError
from engram_memory.engine.ports.host_vault import DestroyedKey, HeldKey, VaultImage
from engram_memory.engine.ports.store import IssuedBindingRow, KeyRing, RevocationRow, Scope, WrappedKey
from engram_memory.host.recovery.archive import ArchiveInvalid

SECTION_FORMAT = "engram-memory/backup-keys"
SECTION_VERSION = 1
SECRET_BYTES = 32


@dataclass(frozen=True, slots=True)
class HomeFiles:
    """The home's files an archive carries: keys/secret.key, keys/host-signing.pem and policy.toml."""

    secret_key: bytes
    signing_key_pem: bytes
    policy_toml: str


@dataclass(frozen=True, slots=True)
class KeySection:
    image: VaultImage  # keys wrapped under the restoring home's active KEK once decoded
    home: HomeFiles


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def encode_section(
    image: VaultImage, owners: Collection[str], keyring: KeyRing, wrap_key: bytes, home: HomeFiles
) -> tuple[bytes, dict[str, int]]:
    """The section's bytes and its counts; only keys of `owners` (the archived bodies) are carried.

    Raises ContractError BLOB_MISSING when a key does not open with the home's key ring.
    """
    wanted = set(owners)
    keys = [
        [held.owner_id, held.scope.tenant, held.scope.workspace, held.created_at_ms,
         _b64(aes_key_wrap(wrap_key, keyring.unwrap(held.key.kek_id, held.key.wrapped)))]
        for held in image.keys
        if held.owner_id in wanted
    ]  # fmt: skip
    document = {
        "format": SECTION_FORMAT,
        "format_version": SECTION_VERSION,
        "keys": keys,
        "destroyed": [[d.owner_id, d.scope.tenant, d.scope.workspace, d.destroyed_at_ms] for d in image.destroyed],
        "revocations": [[r.token_id, r.revoked_at_ms, r.revoked_by] for r in image.revocations],
        "issued": [_issued_fields(row) for row in image.issued],
        "home": {
            "secret_key": _b64(home.secret_key),
            "signing_key": home.signing_key_pem.decode("ascii"),
            "policy": home.policy_toml,
        },
    }
    counts = {
        "keys": len(keys),
        "destroyed": len(image.destroyed),
        "revocations": len(image.revocations),
        "issued": len(image.issued),
    }
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode("utf-8"), counts


def _issued_fields(row: IssuedBindingRow) -> dict[str, Any]:
    return {**asdict(row), "grants": sorted(row.grants)}


def decode_section(raw: bytes, wrap_key: bytes, keyring: KeyRing) -> KeySection:
    """The section with every data key wrapped again under `keyring`'s active KEK.

    Raises ArchiveInvalid when the section is not one this version writes or a key does not unwrap.
    """
    try:
        document = json.loads(raw)
        if document.get("format") != SECTION_FORMAT or document.get("format_version") != SECTION_VERSION:
            raise ValueError("another key section format")
        keys = [
            HeldKey(str(owner), Scope(tenant=str(tenant), workspace=str(workspace)),
                    _rewrapped(keyring, aes_key_unwrap(wrap_key, base64.b64decode(wrapped, validate=True))),
                    int(created))
            for owner, tenant, workspace, created, wrapped in document["keys"]
        ]  # fmt: skip
        destroyed = [
            DestroyedKey(str(owner), Scope(tenant=str(tenant), workspace=str(workspace)), int(at))
            for owner, tenant, workspace, at in document["destroyed"]
        ]
        revocations = [RevocationRow(str(t), int(at), str(by)) for t, at, by in document["revocations"]]
        issued = [_issued_row(fields) for fields in document["issued"]]
        home = document["home"]
        files = HomeFiles(
            secret_key=base64.b64decode(home["secret_key"], validate=True),
            signing_key_pem=str(home["signing_key"]).encode("ascii"),
            policy_toml=str(home["policy"]),
        )
        _check_home_files(files)
    except (ValueError, KeyError, TypeError, AttributeError, InvalidUnwrap, ContractError) as exc:
        raise ArchiveInvalid("the archive's key section is not one this version reads") from exc
    return KeySection(VaultImage(keys=keys, destroyed=destroyed, revocations=revocations, issued=issued), files)


def _check_home_files(files: HomeFiles) -> None:
    """Raises ValueError unless the files are what a home can use: a restore must not install a broken key."""
    if len(files.secret_key) != SECRET_BYTES:
        raise ValueError("the digest secret is not 32 bytes")
    if not isinstance(serialization.load_pem_private_key(files.signing_key_pem, password=None), Ed25519PrivateKey):
        raise ValueError("the signing key is not an Ed25519 key")


def _rewrapped(keyring: KeyRing, data_key: bytes) -> WrappedKey:
    kek_id, wrapped = keyring.wrap(data_key)
    return WrappedKey(kek_id=kek_id, wrapped=wrapped)


def _issued_row(fields: dict[str, Any]) -> IssuedBindingRow:
    return IssuedBindingRow(
        token_id=str(fields["token_id"]),
        tenant=str(fields["tenant"]),
        workspace=str(fields["workspace"]),
        principal=str(fields["principal"]),
        agent_id=str(fields["agent_id"]),
        session=str(fields["session"]),
        purpose_ref=str(fields["purpose_ref"]),
        grants=tuple(str(tool) for tool in fields["grants"]),
        confirm_mutations=bool(fields["confirm_mutations"]),
        trust_class=str(fields["trust_class"]),
        issued_at_ms=int(fields["issued_at_ms"]),
        expires_at_ms=int(fields["expires_at_ms"]),
        issued_by=str(fields["issued_by"]),
    )
