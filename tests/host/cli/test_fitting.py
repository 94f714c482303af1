"""The command behaves as people expect of a command line: a version, `--home` anywhere, dates as typed,
lists that say when they stopped, options that are refused rather than ignored, times people can read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from engram_memory import __version__
from engram_memory.contract.instants import parse_instant
from engram_memory.host.settings import HostPaths
from tests.host.clirun import Done, assert_one_line_failure, cli
from tests.support.homes import make_home, remember

ERROR = "engram-memory: error: "


def _ok(done: Done) -> str:
    assert "Traceback" not in done.stderr, done.stderr
    assert done.code == 0, done
    return done.stdout


def _audit(*args: str | Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in _ok(cli("audit", "export", *args)).splitlines()]


def test_version_prints_the_installed_version_and_needs_no_home(tmp_path: Path) -> None:
    done = cli("--version", env={"ENGRAM_HOME": str(tmp_path / "none")})
    assert (done.code, done.stdout, done.stderr) == (0, f"engram-memory {__version__}\n", "")


def test_home_before_the_subcommand_is_the_subcommands_home(sqlite_paths: HostPaths, tmp_path: Path) -> None:
    (record_id,) = remember(sqlite_paths, "The tern relay restarts nightly.")
    before = json.loads(_ok(cli("--home", sqlite_paths.home, "records", "list", "--json")))
    assert [item["record_id"] for item in before] == [record_id]
    # The flag beats ENGRAM_HOME; a --home after the subcommand beats the one before it.
    empty = make_home(tmp_path / "empty")
    over_env = cli("--home", sqlite_paths.home, "records", "list", "--json", env={"ENGRAM_HOME": str(empty.home)})
    assert [item["record_id"] for item in json.loads(_ok(over_env))] == [record_id]
    inner = cli("--home", sqlite_paths.home, "records", "list", "--json", "--home", empty.home)
    assert json.loads(_ok(inner)) == []
    nested = cli("--home", sqlite_paths.home, "confirmations", "list", "--json")
    assert json.loads(_ok(nested)) == []


def test_audit_export_takes_dates_and_iso_instants(sqlite_paths: HostPaths) -> None:
    remember(sqlite_paths, "The heron queue drains at noon.")
    home = ("--home", str(sqlite_paths.home))
    every = _audit(*home)
    assert len(every) == 2
    first_ms = parse_instant(every[0]["at"])
    assert first_ms is not None
    for since in ("2000-01-01", "2000-01-01T00:00", "2000-01-01T01:00:00+01:00", "2000-01-01T00:00:00Z"):
        assert _audit(*home, "--since", since) == every, since
    assert _audit(*home, "--until", "2000-01-01") == []
    assert _audit(*home, "--since", "2999-12-31") == []
    assert _audit(*home, "--since", every[0]["at"]) == every  # the canonical form, as before


@pytest.mark.parametrize("typed", ["yesterday", "2026-13-01", "01/12/2026", "2026-12-01T25:00"])
def test_audit_export_refuses_a_date_it_cannot_read_in_one_line(sqlite_paths: HostPaths, typed: str) -> None:
    done = cli("audit", "export", "--since", typed, "--home", sqlite_paths.home)
    assert_one_line_failure(done)
    assert done.stderr.startswith(ERROR + "--since must be a date (2026-01-31")


def test_serve_refuses_http_options_without_http(sqlite_paths: HostPaths) -> None:
    done = cli("serve", "--port", "9000", "--home", sqlite_paths.home)
    assert_one_line_failure(done)
    assert done.stderr == ERROR + "--port applies only with --http (serve over stdio takes none of them)\n"
    several = cli("serve", "--host", "127.0.0.1", "--max-connections", "5", "--home", sqlite_paths.home)
    assert_one_line_failure(several)
    assert several.stderr.startswith(ERROR + "--host, --max-connections apply only with --http")


def test_records_list_says_when_it_stopped_at_its_limit(sqlite_paths: HostPaths) -> None:
    ids = remember(sqlite_paths, "First note of three.", "Second note of three.", "Third note of three.")
    cut = cli("records", "list", "--limit", "2", "--json", "--home", sqlite_paths.home)
    assert [item["record_id"] for item in json.loads(_ok(cut))] == ids[:2]
    assert cut.stderr == "engram-memory: showing the first 2 records; more exist (raise --limit to see them)\n"
    whole = cli("records", "list", "--limit", "3", "--home", sqlite_paths.home)
    assert whole.code == 0 and whole.stderr == "" and all(record_id in whole.stdout for record_id in ids)
    people = cli("records", "list", "--limit", "1", "--home", sqlite_paths.home)
    assert ids[0] in people.stdout and ids[1] not in people.stdout and "showing the first 1 records" in people.stderr


def test_records_show_gives_instants_not_epoch_milliseconds(sqlite_paths: HostPaths) -> None:
    (record_id,) = remember(sqlite_paths, "The plover index rebuilds weekly.")
    shown = json.loads(_ok(cli("records", "show", record_id, "--json", "--home", sqlite_paths.home)))
    for name in ("captured_at", "admitted_at", "valid_from"):
        assert parse_instant(shown[name]) is not None, (name, shown[name])
    text = _ok(cli("records", "show", record_id, "--home", sqlite_paths.home))
    assert f"valid_from: {shown['valid_from']}" in text
