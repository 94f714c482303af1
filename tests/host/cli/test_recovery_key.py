"""`recovery-key export` and `rotate`: the key on stdout or in a new 0600 file, guidance on stderr only."""

from __future__ import annotations

import json
import stat
from pathlib import Path

from engram_memory.host.keys.recovery import load_recovery_key, parse_recovery_key
from engram_memory.host.settings import HostPaths
from tests.host.clirun import assert_one_line_failure, cli, cli_process
from tests.support.homes import make_home


def test_export_prints_exactly_the_key_on_stdout_and_how_to_keep_it_on_stderr(tmp_path: Path) -> None:
    paths = make_home(tmp_path / "home")
    done = cli_process("recovery-key", "export", "--home", paths.home)
    assert done.code == 0
    key = load_recovery_key(paths)
    assert done.stdout == key.text() + "\n"
    assert key.key_id in done.stderr and "keep it offline" in done.stderr and key.text() not in done.stderr


def test_export_json_names_the_id(tmp_path: Path) -> None:
    paths = make_home(tmp_path / "home")
    shown = json.loads(cli("recovery-key", "export", "--json", "--home", paths.home).stdout)
    assert parse_recovery_key(shown["recovery_key"]) == load_recovery_key(paths)
    assert shown["key_id"] == load_recovery_key(paths).key_id


def test_export_to_a_file_makes_it_0600_and_never_writes_over_one(tmp_path: Path) -> None:
    paths = make_home(tmp_path / "home")
    target = tmp_path / "offline.key"
    done = cli("recovery-key", "export", "--output", target, "--home", paths.home)
    assert done.code == 0 and done.stdout == "" and str(target) in done.stderr
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert parse_recovery_key(target.read_text(encoding="utf-8")) == load_recovery_key(paths)
    target.write_text("something else", encoding="utf-8")
    line = assert_one_line_failure(cli("recovery-key", "export", "--output", target, "--home", paths.home))
    assert "already exists" in line and target.read_text(encoding="utf-8") == "something else"


def test_export_from_a_home_without_a_key_says_how_to_make_one(tmp_path: Path) -> None:
    line = assert_one_line_failure(cli("recovery-key", "export", "--home", tmp_path / "none"))
    assert line == "engram-memory: error: keys/recovery.key is missing: run 'engram-memory init' to make one"


def test_rotate_names_both_ids_and_what_to_do_next(tmp_path: Path) -> None:
    paths = make_home(tmp_path / "home")
    old = load_recovery_key(paths).key_id
    done = cli("recovery-key", "rotate", "--home", paths.home)
    new = load_recovery_key(paths).key_id
    assert done.code == 0 and done.stdout == f"rotated the recovery key: {new} replaces {old}\n"
    assert "take a new backup" in done.stderr and old in done.stderr


def test_backup_of_a_home_made_before_recovery_keys_makes_one_and_warns(tmp_path: Path) -> None:
    paths = make_home(tmp_path / "home")
    paths.recovery_file.unlink()
    done = cli("backup", tmp_path / "a.backup", "--home", paths.home, "--json")
    assert done.code == 0, done.stderr
    assert "recovery-key export" in done.stderr and paths.recovery_file.exists()
    assert json.loads(done.stdout)["recovery_key_id"] == load_recovery_key(paths).key_id
    again = cli("backup", tmp_path / "b.backup", "--home", paths.home, "--json")
    assert again.code == 0 and again.stderr == ""


def test_init_of_an_upgraded_home_with_data_adds_a_recovery_key(tmp_path: Path) -> None:
    """A home made before recovery keys holds data: init makes the key it lacks, and keeps every other key."""
    paths: HostPaths = make_home(tmp_path / "home")
    assert cli("bind", "--tenant", "t", "--workspace", "w", "--principal", "p", "--agent", "a", "--session", "s",
               "--purpose", "x", "--all-tools", "--home", paths.home).code == 0  # fmt: skip
    paths.recovery_file.unlink()
    before = {p.name: p.read_bytes() for p in (paths.kek_file, paths.secret_file, paths.signing_key_file)}
    done = cli("init", "--home", paths.home)
    assert done.code == 0, done.stderr
    assert f"created {paths.recovery_file}" in done.stdout and "recovery-key export" in done.stderr
    assert {p.name: p.read_bytes() for p in (paths.kek_file, paths.secret_file, paths.signing_key_file)} == before
