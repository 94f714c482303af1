"""The host reads what its agents remember: `records show --text` and `records search`, audited as host reads."""

from __future__ import annotations

import json
from typing import Any

from engram_memory.host.compose import current_user
from engram_memory.host.settings import HostPaths
from tests.host.clirun import Done, assert_one_line_failure, cli
from tests.support.homes import remember

ERROR = "engram-memory: error: "


def _ok(done: Done) -> str:
    assert "Traceback" not in done.stderr, done.stderr
    assert done.code == 0, done
    return done.stdout


def _audit(paths: HostPaths) -> list[dict[str, Any]]:
    return [json.loads(line) for line in _ok(cli("audit", "export", "--home", paths.home)).splitlines()]


def test_show_text_gives_the_records_words_and_citations_and_is_audited(paths: HostPaths) -> None:
    (record_id,) = remember(paths, "The kestrel gateway drains before deploys.")
    plain = _ok(cli("records", "show", record_id, "--home", paths.home))
    assert "kestrel" not in plain  # metadata only unless asked
    shown = json.loads(_ok(cli("records", "show", record_id, "--text", "--json", "--home", paths.home)))
    (component,) = shown["content"]["components"]
    assert component["text"] == "The kestrel gateway drains before deploys."
    assert shown["content"]["citations"][0]["source_ref"] == "doc:handbook"
    people = _ok(cli("records", "show", record_id, "--text", "--home", paths.home))
    assert "text:\n  [decision] The kestrel gateway drains before deploys.  (cites src)\n" in people
    reads = [row for row in _audit(paths) if row["token_id"] == "host-read"]
    assert len(reads) == 2
    assert {(row["tool"], row["outcome"], row["principal"]) for row in reads} == {
        ("engram_memory_get", "ok", current_user())
    }
    assert all((row["tenant"], row["workspace"]) == ("tenant-a", "workspace-1") for row in reads)


def test_show_text_of_a_record_no_longer_current_fails_in_one_line(paths: HostPaths) -> None:
    (record_id,) = remember(paths, "The heron index is rebuilt weekly.")
    _ok(cli("records", "expire", record_id, "--home", paths.home))
    line = assert_one_line_failure(cli("records", "show", record_id, "--text", "--home", paths.home))
    assert line.startswith(ERROR + "the record's text cannot be read: ")


def test_search_finds_as_an_agent_would_in_any_language_and_only_in_its_workspace(paths: HostPaths) -> None:
    korean, english = remember(paths, "데이터베이스를 매일 밤 백업한다.", "The plover queue drains at noon.")
    (elsewhere,) = remember(paths, "The plover queue of the other team.", workspace="workspace-2")
    scope = ("--tenant", "tenant-a", "--workspace", "workspace-1", "--home", str(paths.home))
    found = json.loads(_ok(cli("records", "search", "데이터베이스로", *scope, "--json")))
    assert [item["record_id"] for item in found][:1] == [korean]
    assert found[0]["text"] == "데이터베이스를 매일 밤 백업한다."
    plover = json.loads(_ok(cli("records", "search", "plover queue", *scope, "--json")))
    assert english in [item["record_id"] for item in plover] and elsewhere not in [i["record_id"] for i in plover]
    people = _ok(cli("records", "search", "plover", *scope))
    assert people.startswith(f" 1. {english}  The plover queue drains at noon.")
    searches = [row for row in _audit(paths) if row["token_id"] == "host-read"]
    assert [row["tool"] for row in searches] == ["engram_memory_search"] * 3


def test_search_of_an_empty_workspace_says_so(paths: HostPaths) -> None:
    said = _ok(cli("records", "search", "anything", "--tenant", "t", "--workspace", "w", "--home", paths.home))
    assert said == "no current memory matches\n"
