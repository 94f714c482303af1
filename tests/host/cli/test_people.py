"""`engram-memory people` as the operator uses it: the enrolment code is printed once and kept nowhere but as
its digest, listings never show a secret, and every mistake is one line."""

from __future__ import annotations

import json

from engram_memory.host.access.people import digest
from engram_memory.host.settings import HostPaths
from tests.host.clirun import assert_one_line_failure, cli
from tests.support.raw import raw_vault

ERROR = "engram-memory: error: "


def _ok(*args: str, paths: HostPaths) -> str:
    done = cli("people", *args, "--home", str(paths.home))
    assert done.code == 0 and "Traceback" not in done.stderr, done
    return done.stdout


def test_add_prints_the_code_once_and_the_vault_keeps_only_its_digest(paths: HostPaths) -> None:
    added = json.loads(_ok("add", "Alice@Acme.com", "--group", "eng", "--enrol-for", "48h", "--json", paths=paths))
    code = added["enrolment_code"]
    assert added["email"] == "alice@acme.com" and added["groups"] == ["eng"] and added["status"] == "enrolling"
    with raw_vault(paths) as db:
        stored = db.value("SELECT enrolment_digest FROM people")
    assert stored == digest(code)
    listed = _ok("list", "--json", paths=paths)
    assert code not in listed and stored not in listed
    assert [item["email"] for item in json.loads(listed)] == ["alice@acme.com"]
    text = _ok("add", "bob@acme.com", paths=paths)
    assert text.startswith("enrolment code for bob@acme.com: ")
    assert "alice@acme.com  enrolling  eng" in _ok("list", paths=paths)


def test_groups_disable_enable_and_a_new_code(paths: HostPaths) -> None:
    _ok("add", "carol@acme.com", paths=paths)
    assert _ok("groups", "carol@acme.com", "--group", "ops", "--group", "eng", paths=paths) == (
        "carol@acme.com: groups eng, ops\n"
    )
    first = json.loads(_ok("enrol", "carol@acme.com", "--json", paths=paths))["enrolment_code"]
    second = json.loads(_ok("enrol", "carol@acme.com", "--json", paths=paths))["enrolment_code"]
    assert first != second
    assert "disabled" in _ok("disable", "carol@acme.com", paths=paths)
    assert json.loads(_ok("list", "--json", paths=paths))[0]["status"] == "disabled"
    line = assert_one_line_failure(cli("people", "enrol", "carol@acme.com", "--home", paths.home))
    assert line == ERROR + "carol@acme.com is disabled (engram-memory people enable)"
    _ok("enable", "carol@acme.com", paths=paths)
    assert json.loads(_ok("list", "--json", paths=paths))[0]["status"] == "enrolling"


def test_mistakes_are_one_line(paths: HostPaths) -> None:
    _ok("add", "dan@acme.com", paths=paths)
    cases = [
        (("add", "dan@acme.com"), "dan@acme.com has an account already"),
        (("add", "nobody"), "an email looks like name@example.com"),
        (("add", "erin@acme.com", "--enrol-for", "soon"), "--enrol-for: a duration looks like"),
        (("groups", "ghost@acme.com", "--group", "x"), "no account for ghost@acme.com"),
        (("disable", "ghost@acme.com"), "no account for ghost@acme.com"),
    ]
    for args, words in cases:
        line = assert_one_line_failure(cli("people", *args, "--home", paths.home))
        assert line.startswith(ERROR + words), line
    assert [item["email"] for item in json.loads(_ok("list", "--json", paths=paths))] == ["dan@acme.com"]
