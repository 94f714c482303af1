"""The host's key files: created once with mode 0600 in a 0700 folder, never overwritten, loaded strictly."""

from __future__ import annotations

import base64
import json
import os
import re
import stat
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from engram_memory.engine.sealing.keys import KEK_BYTES
from engram_memory.host.keys.files import (
    KeyFileError,
    create_key_files,
    key_id,
    load_keyring,
    load_mac_keys,
    load_signing_key,
)
from engram_memory.host.settings import HostPaths


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def fresh(tmp_path: Path) -> HostPaths:
    return HostPaths(home=tmp_path / "home")


@pytest.fixture
def keyed(fresh: HostPaths) -> HostPaths:
    create_key_files(fresh)
    return fresh


def _key_bytes(paths: HostPaths) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in (paths.kek_file, paths.secret_file, paths.signing_key_file)}


# -- creation ------------------------------------------------------------------------------------


def test_create_key_files_creates_four_files_when_none_exist(fresh: HostPaths) -> None:
    created = create_key_files(fresh)
    assert created == [fresh.kek_file, fresh.secret_file, fresh.signing_key_file, fresh.recovery_file]
    names = sorted(p.name for p in fresh.keys_dir.iterdir())
    assert names == ["host-signing.pem", "kek.json", "recovery.key", "secret.key"]


def test_create_key_files_makes_files_0600_in_a_0700_folder(fresh: HostPaths) -> None:
    create_key_files(fresh)
    assert _mode(fresh.keys_dir) == 0o700
    for path in (fresh.kek_file, fresh.secret_file, fresh.signing_key_file, fresh.recovery_file):
        assert _mode(path) == 0o600, path


def test_create_key_files_makes_files_0600_when_umask_is_permissive(fresh: HostPaths) -> None:
    old = os.umask(0)
    try:
        create_key_files(fresh)
    finally:
        os.umask(old)
    assert _mode(fresh.keys_dir) == 0o700
    for path in (fresh.kek_file, fresh.secret_file, fresh.signing_key_file, fresh.recovery_file):
        assert _mode(path) == 0o600, path


def test_create_key_files_changes_nothing_when_run_twice(keyed: HostPaths) -> None:
    before = _key_bytes(keyed)
    assert create_key_files(keyed) == []
    assert _key_bytes(keyed) == before


def test_create_key_files_recreates_only_the_missing_file(keyed: HostPaths) -> None:
    before = _key_bytes(keyed)
    keyed.secret_file.unlink()
    assert create_key_files(keyed) == [keyed.secret_file]
    after = _key_bytes(keyed)
    assert after["kek.json"] == before["kek.json"]
    assert after["host-signing.pem"] == before["host-signing.pem"]
    assert len(after["secret.key"]) == 32
    assert after["secret.key"] != before["secret.key"]


def test_create_key_files_makes_different_keys_for_different_homes(tmp_path: Path) -> None:
    first, second = HostPaths(home=tmp_path / "a"), HostPaths(home=tmp_path / "b")
    create_key_files(first)
    create_key_files(second)
    a, b = _key_bytes(first), _key_bytes(second)
    assert all(a[name] != b[name] for name in a)


def test_kek_file_holds_one_active_key_of_the_right_size(keyed: HostPaths) -> None:
    data = json.loads(keyed.kek_file.read_text(encoding="utf-8"))
    assert set(data) == {"active", "keys"}
    assert re.fullmatch(r"kek-[0-9a-f]{8}", data["active"])
    assert list(data["keys"]) == [data["active"]]
    assert len(base64.b64decode(data["keys"][data["active"]], validate=True)) == KEK_BYTES


def test_secret_file_holds_32_random_bytes(keyed: HostPaths) -> None:
    assert len(keyed.secret_file.read_bytes()) == 32


def test_signing_key_file_is_an_unencrypted_pkcs8_ed25519_pem(keyed: HostPaths) -> None:
    pem = keyed.signing_key_file.read_bytes()
    assert pem.startswith(b"-----BEGIN PRIVATE KEY-----\n")
    key = serialization.load_pem_private_key(pem, password=None)
    assert isinstance(key, Ed25519PrivateKey)


# -- loading the key ring ------------------------------------------------------------------------


def test_load_keyring_names_the_active_key_of_the_file(keyed: HostPaths) -> None:
    active = json.loads(keyed.kek_file.read_text(encoding="utf-8"))["active"]
    ring = load_keyring(keyed)
    assert ring.active_kek_id == active


def test_load_keyring_wraps_and_unwraps_a_data_key(keyed: HostPaths) -> None:
    data_key = os.urandom(32)
    kek_id, wrapped = load_keyring(keyed).wrap(data_key)
    assert wrapped != data_key
    assert load_keyring(keyed).unwrap(kek_id, wrapped) == data_key


def test_load_keyring_fails_when_file_is_missing(fresh: HostPaths) -> None:
    with pytest.raises(KeyFileError, match=r"^cannot read kek\.json: run 'engram-memory init' first$"):
        load_keyring(fresh)


@pytest.mark.parametrize(
    "content",
    [
        b"{",
        b"[]",
        b'{"active": "a"}',
        b'{"active": "a", "keys": {"a": "not base64!"}}',
        b'{"active": "a", "keys": {"a": "AAAA"}}',
        b'{"active": "b", "keys": {"a": "' + base64.b64encode(bytes(KEK_BYTES)) + b'"}}',
        b'{"active": "a", "keys": {"a": 5}}',
        b"\xff\xfe\x00",
    ],
    ids=["truncated", "list", "no-keys", "not-base64", "short-key", "active-missing", "number", "not-utf8"],
)
def test_load_keyring_fails_when_file_is_malformed(keyed: HostPaths, content: bytes) -> None:
    keyed.kek_file.write_bytes(content)
    with pytest.raises(KeyFileError, match=r"^kek\.json is malformed$"):
        load_keyring(keyed)


# -- MAC keys ------------------------------------------------------------------------------------


def test_load_mac_keys_derives_two_distinct_32_byte_keys(keyed: HostPaths) -> None:
    macs = load_mac_keys(keyed)
    assert len(macs.cursor) == 32
    assert len(macs.audit) == 32
    assert macs.cursor != macs.audit
    assert keyed.secret_file.read_bytes() not in (macs.cursor, macs.audit)


def test_load_mac_keys_is_stable_across_loads(keyed: HostPaths) -> None:
    assert load_mac_keys(keyed) == load_mac_keys(keyed)


def test_load_mac_keys_differ_between_homes(tmp_path: Path) -> None:
    first, second = HostPaths(home=tmp_path / "a"), HostPaths(home=tmp_path / "b")
    create_key_files(first)
    create_key_files(second)
    assert load_mac_keys(first).audit != load_mac_keys(second).audit


@pytest.mark.parametrize("size", [0, 31, 33, 64])
def test_load_mac_keys_fails_when_secret_has_wrong_size(keyed: HostPaths, size: int) -> None:
    keyed.secret_file.write_bytes(b"s" * size)
    with pytest.raises(KeyFileError, match=r"^secret\.key is malformed$"):
        load_mac_keys(keyed)


def test_load_mac_keys_fails_when_secret_is_missing(fresh: HostPaths) -> None:
    with pytest.raises(KeyFileError, match=r"^cannot read secret\.key: run 'engram-memory init' first$"):
        load_mac_keys(fresh)


# -- signing key ---------------------------------------------------------------------------------


def test_load_signing_key_returns_the_ed25519_key_of_the_file(keyed: HostPaths) -> None:
    key = load_signing_key(keyed)
    assert isinstance(key, Ed25519PrivateKey)
    assert key_id(key.public_key()) == key_id(load_signing_key(keyed).public_key())


def test_load_signing_key_fails_when_file_is_missing(fresh: HostPaths) -> None:
    with pytest.raises(KeyFileError, match=r"^cannot read host-signing\.pem: run 'engram-memory init' first$"):
        load_signing_key(fresh)


def test_load_signing_key_fails_when_file_is_a_folder(keyed: HostPaths) -> None:
    keyed.signing_key_file.unlink()
    keyed.signing_key_file.mkdir()
    with pytest.raises(KeyFileError, match=r"^cannot read host-signing\.pem"):
        load_signing_key(keyed)


@pytest.mark.parametrize("content", [b"", b"junk", b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"])
def test_load_signing_key_fails_when_file_is_malformed(keyed: HostPaths, content: bytes) -> None:
    keyed.signing_key_file.write_bytes(content)
    with pytest.raises(KeyFileError, match=r"^host-signing\.pem is malformed$"):
        load_signing_key(keyed)


def test_load_signing_key_fails_when_key_is_not_ed25519(keyed: HostPaths) -> None:
    other = ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    keyed.signing_key_file.write_bytes(other)
    with pytest.raises(KeyFileError, match=r"^host-signing\.pem is not an Ed25519 key$"):
        load_signing_key(keyed)


def test_load_signing_key_fails_when_key_is_password_protected(keyed: HostPaths) -> None:
    locked = Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"pass-phrase"),
    )
    keyed.signing_key_file.write_bytes(locked)
    with pytest.raises(KeyFileError, match=r"^host-signing\.pem"):
        load_signing_key(keyed)


# -- key id --------------------------------------------------------------------------------------


def test_key_id_is_host_prefixed_16_hex_digits() -> None:
    assert re.fullmatch(r"host-[0-9a-f]{16}", key_id(Ed25519PrivateKey.generate().public_key()))


def test_key_id_differs_between_keys() -> None:
    assert key_id(Ed25519PrivateKey.generate().public_key()) != key_id(Ed25519PrivateKey.generate().public_key())


def test_key_id_is_stable_for_one_key() -> None:
    public = Ed25519PrivateKey.generate().public_key()
    assert key_id(public) == key_id(public)
