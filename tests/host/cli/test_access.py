"""`engram-memory access check` and `access example`: what a person would get, read from the home's
access.toml exactly as sign-in reads it; a refusal is an answer (exit 0), an unreadable file a failure."""

from __future__ import annotations

import json
from pathlib import Path

from engram_memory.host.access.rules_file import EXAMPLE_ACCESS_TOML
from tests.host.clirun import assert_one_line_failure, cli


def _home(tmp_path: Path, text: str = EXAMPLE_ACCESS_TOML) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    (home / "access.toml").write_text(text, encoding="utf-8")
    return home


def test_example_prints_a_file_that_check_reads(tmp_path: Path) -> None:
    printed = cli("access", "example")
    assert printed.code == 0
    assert printed.stdout == EXAMPLE_ACCESS_TOML
    home = _home(tmp_path, printed.stdout)
    done = cli("access", "check", "--home", home, "--email", "Alice@Example.com")
    assert done.code == 0, done
    assert "allowed by rule 'engineering' as alice@example.com" in done.stdout
    assert "tenant acme; workspaces engineering, shared (a client naming none gets engineering)" in done.stdout
    assert "tools capture, get, request_admission, search" in done.stdout
    assert "access tokens live 10m; refresh for 30d" in done.stdout


def test_check_as_json_names_the_rule_and_the_binding(tmp_path: Path) -> None:
    home = _home(tmp_path)
    done = cli("access", "check", "--home", home, "--email", "a@example.com", "--json")
    assert json.loads(done.stdout) == {
        "principal": "a@example.com",
        "rule": "engineering",
        "refused": False,
        "tenant": "acme",
        "workspaces": ["engineering", "shared"],
        "grants": [
            "engram_memory_capture",
            "engram_memory_get",
            "engram_memory_request_admission",
            "engram_memory_search",
        ],
        "purpose": "team-memory",
        "confirm_mutations": False,
        "trust_class": "asserted",
        "access_lifetime_s": 600,
        "refresh_lifetime_s": 2_592_000,
    }


def test_a_refusal_is_an_answer_saying_which_rule_or_none(tmp_path: Path) -> None:
    home = _home(tmp_path)
    by_rule = cli("access", "check", "--home", home, "--email", "c@example.com", "--groups", "contractors")
    assert by_rule.code == 0
    assert by_rule.stdout == "refused: rule 'contractors' refuses them; c@example.com could not sign in\n"
    unverified = cli("access", "check", "--home", home, "--email", "a@example.com", "--unverified-email", "--json")
    assert json.loads(unverified.stdout) == {"principal": "a@example.com", "rule": None, "refused": True}


def test_no_rules_file_or_a_broken_one_fails_in_one_line(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    line = assert_one_line_failure(cli("access", "check", "--home", empty, "--email", "a@example.com"))
    assert "no access rules" in line
    assert "access example" in line
    broken = _home(tmp_path, EXAMPLE_ACCESS_TOML + 'grant = ["all"]\n')
    line = assert_one_line_failure(cli("access", "check", "--home", broken, "--email", "a@example.com"))
    assert "rule 2 ('engineering'): unknown key 'grant'" in line


def test_check_needs_someone_to_check(tmp_path: Path) -> None:
    line = assert_one_line_failure(cli("access", "check", "--home", _home(tmp_path)))
    assert "give --email or --subject" in line


def test_add_client_refuses_a_redirect_that_is_neither_https_nor_loopback(tmp_path: Path) -> None:
    home = _home(tmp_path)
    for uri in ("http://evil.example/cb", "ftp://localhost/cb", "https://x.example/cb#frag"):
        line = assert_one_line_failure(cli("access", "add-client", "Agent", "--redirect-uri", uri, "--home", home))
        assert f"redirect URI '{uri}' is neither https nor http on loopback" in line
    nameless = cli("access", "add-client", " ", "--redirect-uri", "http://localhost:1/cb", "--home", home)
    assert "a client needs a name" in assert_one_line_failure(nameless)
