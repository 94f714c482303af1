"""`export` and `import`: a workspace's memories out and back in through the admission policy, and a folder
of Markdown notes in; both stores."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from engram_memory.host.settings import HostPaths
from tests.host.clirun import Done, assert_one_line_failure, cli
from tests.support.homes import remember
from tests.support.raw import raw_store

ERROR = "engram-memory: error: "
TEXTS = ("The kestrel gateway drains before deploys.", "데이터베이스를 매일 밤 백업한다.", "部署前先排空网关。")


def _ok(done: Done) -> str:
    assert "Traceback" not in done.stderr, done.stderr
    assert done.code == 0, done
    return done.stdout


def _current(paths: HostPaths, tenant: str, workspace: str) -> list[dict[str, Any]]:
    lines = _ok(cli("export", "--tenant", tenant, "--workspace", workspace, "--home", paths.home)).splitlines()
    return [json.loads(line) for line in lines]


def _contents(lines: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return sorted(
        (
            tuple(component["text"] for component in line["memory"]["components"]),
            json.dumps(line["memory"]["citations"], sort_keys=True),
        )
        for line in lines
    )


def test_export_then_import_gives_the_same_memories_and_a_second_import_changes_nothing(
    paths: HostPaths, tmp_path: Path
) -> None:
    remember(paths, *TEXTS)
    exported = _current(paths, "tenant-a", "workspace-1")
    assert len(exported) == 3 and all(line["format"] == "engram-memory-export/1" for line in exported)
    assert exported[0]["provenance"]["principal"] == "alice"
    export_file = tmp_path / "export.jsonl"
    said = _ok(
        cli(
            "export",
            "--tenant",
            "tenant-a",
            "--workspace",
            "workspace-1",
            "--output",
            export_file,
            "--home",
            paths.home,
        )
    )
    assert said == f"exported 3 memories of tenant-a/workspace-1 to {export_file}\n"
    assert export_file.stat().st_mode & 0o777 == 0o600
    first = json.loads(
        _ok(cli("import", export_file, "--tenant", "tenant-b", "--workspace", "copy", "--json", "--home", paths.home))
    )
    assert (first["memories"], first["accepted"], first["refused"]) == (3, 3, {})
    assert first["seconds"] > 0 and first["memories_per_s"] > 0
    copied = _current(paths, "tenant-b", "copy")
    assert _contents(copied) == _contents(exported)
    again = json.loads(
        _ok(cli("import", export_file, "--tenant", "tenant-b", "--workspace", "copy", "--json", "--home", paths.home))
    )
    assert again["memories"] == 3 and again["refused"] == {}
    assert len(_current(paths, "tenant-b", "copy")) == 3  # idempotent: nothing new
    found = json.loads(
        _ok(
            cli(
                "records",
                "search",
                "데이터베이스로",
                "--tenant",
                "tenant-b",
                "--workspace",
                "copy",
                "--json",
                "--home",
                paths.home,
            )
        )
    )
    assert found[0]["text"] == TEXTS[1]


def test_markdown_export_is_for_people(paths: HostPaths) -> None:
    (record_id,) = remember(paths, TEXTS[0])
    text = _ok(
        cli(
            "export", "--tenant", "tenant-a", "--workspace", "workspace-1", "--format", "markdown", "--home", paths.home
        )
    )
    assert text.startswith("# Memories of tenant-a/workspace-1\n")
    assert f"## {record_id}\n\n{TEXTS[0]}\n" in text and "doc:handbook" in text


def test_a_folder_of_markdown_notes_imports_one_memory_a_note(paths: HostPaths, tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    (notes / "team").mkdir(parents=True)
    (notes / "deploys.md").write_text("# Deploys\n\nThe heron relay restarts nightly.\n", encoding="utf-8")
    (notes / "team" / "meetings.md").write_text("회의는 매주 월요일 오전 10시에 한다.\n", encoding="utf-8")
    (notes / "empty.md").write_text("\n", encoding="utf-8")
    (notes / "ignored.txt").write_text("not a note", encoding="utf-8")
    report = json.loads(
        _ok(cli("import", notes, "--tenant", "tenant-a", "--workspace", "notes", "--json", "--home", paths.home))
    )
    assert (report["memories"], report["accepted"]) == (2, 2)
    lines = _current(paths, "tenant-a", "notes")
    sources = sorted(line["memory"]["citations"][0]["source_ref"] for line in lines)
    assert sources == ["file:deploys.md", "file:team/meetings.md"]
    found = json.loads(
        _ok(
            cli(
                "records",
                "search",
                "월요일 회의",
                "--tenant",
                "tenant-a",
                "--workspace",
                "notes",
                "--json",
                "--home",
                paths.home,
            )
        )
    )
    assert found[0]["text"] == "회의는 매주 월요일 오전 10시에 한다."


def test_an_import_ends_with_the_planner_statistics_brought_up_to_date(paths: HostPaths, tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    for n, text in enumerate((*TEXTS, "東京の会議は毎週火曜日に開く。")):
        (notes / f"note-{n}.md").write_text(text + "\n", encoding="utf-8")
    _ok(cli("import", notes, "--tenant", "tenant-a", "--workspace", "notes", "--json", "--home", paths.home))
    with raw_store(paths) as db:
        if db.is_postgres:
            analysed = db.count(
                "pg_stat_user_tables",
                "relname = 'records' AND last_analyze IS NOT NULL AND last_vacuum IS NOT NULL",
            )
        else:  # PRAGMA optimize analysed what the import's statements used
            analysed = db.count("sqlite_master", "name = 'sqlite_stat1'")
    assert analysed == 1


def test_import_refuses_a_file_that_is_not_memories_in_one_line(paths: HostPaths, tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"memory": {"citations": []}}\n', encoding="utf-8")
    line = assert_one_line_failure(cli("import", bad, "--tenant", "t", "--workspace", "w", "--home", paths.home))
    assert line == ERROR + "a memory needs its payload with at least one citation"
    bad.write_text("not json\n", encoding="utf-8")
    line = assert_one_line_failure(cli("import", bad, "--tenant", "t", "--workspace", "w", "--home", paths.home))
    assert line == ERROR + f"line 1 of {bad} is not JSON"
    assert _current(paths, "t", "w") == []
