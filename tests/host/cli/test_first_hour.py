"""What a new user met in their first hour, each fixed: the console beside `serve --http` without a port
clash (and a clash that names --port), record text in lists, commands that find the only workspace, an
audit export of agents' calls alone, and `bind --help` that explains what it asks for."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from typing import Any

import pytest
import typer.main

from engram_memory.host.cli.app import app
from engram_memory.host.settings import HostPaths
from tests.host.clirun import Done, assert_one_line_failure, cli, cli_process
from tests.support.homes import remember

LONG = "회의록: " + "배포 전에 두 명의 승인이 필요합니다. " * 8


def _ok(done: Done) -> str:
    assert "Traceback" not in done.stderr and done.code == 0, done
    return done.stdout


def _host_reads(paths: HostPaths) -> list[dict[str, Any]]:
    lines = _ok(cli("audit", "export", "--caller", "host", "--home", paths.home)).splitlines()
    return [json.loads(line) for line in lines]


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield int(holder.getsockname()[1])


def _default_port(*command: str) -> int:
    """The default the command tree declares, as --help shows it."""
    group: Any = typer.main.get_command(app)
    for name in command:
        group = group.commands[name]
    (port,) = [param for param in group.params if param.name == "port"]
    return int(port.default)


def test_the_console_and_serve_http_default_to_different_ports() -> None:
    assert (_default_port("console"), _default_port("serve")) == (8766, 8765)


@pytest.mark.parametrize("command", [("console",), ("serve", "--http")])
def test_a_port_in_use_is_named_with_what_to_do(
    sqlite_paths: HostPaths, taken_port: int, command: tuple[str, ...]
) -> None:
    done = cli_process(*command, "--port", str(taken_port), "--home", sqlite_paths.home, timeout=60)
    line = assert_one_line_failure(done)
    assert f"cannot listen on 127.0.0.1:{taken_port}: another program already uses that port" in line
    assert "--port" in line.split("port (")[-1]


def test_records_list_shows_each_current_records_text_cut_short_as_audited_host_reads(paths: HostPaths) -> None:
    short, _long = remember(paths, "The kestrel gateway drains before deploys.", LONG)
    _ok(cli("records", "expire", short, "--home", paths.home))
    listed = _ok(cli("records", "list", "--home", paths.home))
    flat = "".join(listed.split())  # the text column folds at the terminal's width
    assert "회의록:배포전에두명의" in flat and "…" in listed and "".join(LONG.split()) not in flat
    assert "kestrel" not in listed  # an expired record's text cannot be read
    reads = _host_reads(paths)
    assert [(row["tool"], row["outcome"]) for row in reads] == [("engram_memory_get", "ok")]


def test_records_list_without_text_reads_nothing_and_json_adds_text_only_when_asked(paths: HostPaths) -> None:
    (record_id,) = remember(paths, "The plover queue drains at noon.")
    plain = _ok(cli("records", "list", "--no-text", "--home", paths.home))
    assert record_id in plain and "plover" not in plain
    listed = json.loads(_ok(cli("records", "list", "--json", "--home", paths.home)))
    assert "text_preview" not in listed[0]
    assert _host_reads(paths) == []
    with_text = json.loads(_ok(cli("records", "list", "--json", "--text", "--home", paths.home)))
    assert with_text[0]["text_preview"] == "The plover queue drains at noon."
    assert len(_host_reads(paths)) == 1


def test_export_and_search_find_the_only_workspace_by_themselves(paths: HostPaths) -> None:
    remember(paths, "The heron index is rebuilt weekly.")
    exported = [json.loads(line) for line in _ok(cli("export", "--home", paths.home)).splitlines()]
    assert [(line["tenant"], line["workspace"]) for line in exported] == [("tenant-a", "workspace-1")]
    found = _ok(cli("records", "search", "heron", "--home", paths.home))
    assert "The heron index is rebuilt weekly." in found


def test_with_two_workspaces_a_missing_scope_names_the_choices(paths: HostPaths) -> None:
    remember(paths, "First team's note.")
    remember(paths, "Second team's note.", workspace="workspace-2")
    line = assert_one_line_failure(cli("export", "--home", paths.home))
    assert line == (
        "engram-memory: error: 2 workspaces match (tenant-a/workspace-1, tenant-a/workspace-2): "
        "name one with --tenant and --workspace"
    )
    narrowed = _ok(cli("export", "--workspace", "workspace-2", "--home", paths.home))
    assert [json.loads(line)["workspace"] for line in narrowed.splitlines()] == ["workspace-2"]
    none = assert_one_line_failure(cli("export", "--tenant", "nobody", "--home", paths.home))
    assert none.endswith("no workspace of this home matches: name one with --tenant and --workspace")


def test_the_audit_export_keeps_agents_calls_apart_from_the_hosts_reads(paths: HostPaths) -> None:
    (record_id,) = remember(paths, "Counted once by the host.")
    _ok(cli("records", "show", record_id, "--text", "--home", paths.home))
    everything = _ok(cli("audit", "export", "--home", paths.home)).splitlines()
    agents = _ok(cli("audit", "export", "--caller", "agents", "--home", paths.home)).splitlines()
    host = _ok(cli("audit", "export", "--caller", "host", "--home", paths.home)).splitlines()
    assert len(everything) == len(agents) + len(host) and len(host) == 1 and agents
    assert all(json.loads(line)["token_id"] != "host-read" for line in agents)
    refused = assert_one_line_failure(cli("audit", "export", "--caller", "robots", "--home", paths.home))
    assert refused == "engram-memory: error: --caller takes one of agents, host, all"


def test_bind_help_explains_each_thing_it_asks_for() -> None:
    shown = " ".join(_ok(cli("bind", "--help")).split())
    for term, meaning in (
        ("--tenant", "The organisation whose memories these are"),
        ("--workspace", "The shared memory within the tenant"),
        ("--principal", "The person or service the agent acts for"),
        ("--agent", "Which agent program holds the token"),
        ("--session", "A label for this run or conversation"),
        ("--purpose", "Why the agent reads and writes"),
    ):
        assert f"{term} <str> {meaning}" in shown, term
    assert "A binding fixes what one agent may reach and in whose name" in shown
