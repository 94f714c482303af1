"""The recovery key: 32 random bytes written as ERK1- and 14 groups of four base32 letters with a checksum.

Typed back by a person, it is read whatever the case, spacing and dashes; a changed letter is named as
a typo, never as a wrong key; its id (what an archive's header names) tells nothing about it.
"""

from __future__ import annotations

import re
import stat
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engram_memory.host.keys.files import create_key_files
from engram_memory.host.keys.recovery import (
    RecoveryKey,
    RecoveryKeyError,
    create_recovery_key,
    load_recovery_key,
    new_recovery_key,
    parse_recovery_key,
    read_recovery_key,
    rotate_recovery_key,
)
from engram_memory.host.settings import HostPaths

TEXT = re.compile(r"^ERK1(-[A-Z2-7]{4}){14}$")


def test_text_form_is_fourteen_groups_of_four_after_the_prefix() -> None:
    key = new_recovery_key()
    assert TEXT.match(key.text()), key.text()
    assert parse_recovery_key(key.text()) == key


@given(st.binary(min_size=32, max_size=32))
def test_any_key_reads_back_whatever_its_case_spacing_and_dashes(secret: bytes) -> None:
    key = RecoveryKey(secret)
    typed = key.text().lower().replace("-", " ")
    assert parse_recovery_key(f"  {typed}\n") == key
    assert parse_recovery_key(key.text().replace("-", "")) == key


def test_comment_lines_are_ignored() -> None:
    key = new_recovery_key()
    assert parse_recovery_key(f"# kept offline\n{key.text()}\n# the end\n") == key


@pytest.mark.parametrize("position", [5, 20, 40, -1])
def test_one_changed_letter_is_refused_as_mistyped(position: int) -> None:
    text = new_recovery_key().text()
    index = position % len(text)
    if text[index] == "-":
        index += 1
    changed = text[:index] + ("A" if text[index] != "A" else "B") + text[index + 1 :]
    with pytest.raises(RecoveryKeyError, match="mistyped"):
        parse_recovery_key(changed)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "not an engram-memory recovery key"),
        ("hello world", "not an engram-memory recovery key"),
        ("ERK1-AAAA", "mistyped: it has 56 letters"),
        ("ERK1-" + "1" * 56, "mistyped: it has 56 letters"),
    ],
)
def test_other_text_is_refused_with_its_reason(text: str, reason: str) -> None:
    with pytest.raises(RecoveryKeyError, match=reason):
        parse_recovery_key(text)


def test_a_key_never_shows_its_secret_in_its_repr_or_id() -> None:
    key = new_recovery_key()
    assert key.secret.hex() not in repr(key) and key.text() not in repr(key)
    assert re.fullmatch(r"rk-[0-9a-f]{16}", key.key_id)
    assert key.key_id_bytes not in key.secret
    assert new_recovery_key().key_id != key.key_id


def test_each_archive_salt_gives_other_keys_and_the_two_purposes_differ() -> None:
    key = new_recovery_key()
    one, two = b"\x01" * 32, b"\x02" * 32
    assert key.archive_key(one) != key.archive_key(two)
    assert key.archive_key(one) != key.data_keys_key(one)
    assert len(key.archive_key(one)) == 32


def test_the_home_file_is_made_once_0600_and_read_back(tmp_path: Path) -> None:
    paths = HostPaths(home=tmp_path / "home")
    created = create_key_files(paths)
    assert paths.recovery_file in created
    assert stat.S_IMODE(paths.recovery_file.stat().st_mode) == 0o600
    first = load_recovery_key(paths)
    assert create_recovery_key(paths) is False and load_recovery_key(paths) == first
    assert read_recovery_key(paths.recovery_file) == first
    assert paths.recovery_file.read_text(encoding="utf-8").startswith("# engram-memory recovery key")


def test_rotation_replaces_the_key_atomically(tmp_path: Path) -> None:
    paths = HostPaths(home=tmp_path / "home")
    create_key_files(paths)
    old, new = rotate_recovery_key(paths)
    assert old != new and load_recovery_key(paths) == new
    assert stat.S_IMODE(paths.recovery_file.stat().st_mode) == 0o600
    assert not list(paths.keys_dir.glob("*.tmp"))


def test_a_missing_or_unreadable_key_is_named(tmp_path: Path) -> None:
    paths = HostPaths(home=tmp_path / "home")
    with pytest.raises(RecoveryKeyError, match=r"keys/recovery\.key is missing"):
        load_recovery_key(paths)
    with pytest.raises(RecoveryKeyError, match="cannot read the recovery key file"):
        read_recovery_key(tmp_path / "nowhere.key")
