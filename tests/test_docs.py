"""The docs keep up with the code: every tool, error code and CLI command is documented, and the tables that
restate the contract are generated from it (`make docs`) and checked here."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from cogapp import Cog
from typer.main import get_command

from engram_memory.contract.errors import PROTOCOL_FAULT_MESSAGES, PROTOCOL_FAULT_WHEN, WHEN_RETURNED, ErrorCode
from engram_memory.contract.schemas import schema_for_validation
from engram_memory.contract.states import AGENT_OPERATIONS, PERFORMED_BY, Operation
from engram_memory.contract.tools import ALL_TOOLS, ALWAYS_GATED_TOOLS, READ_ONLY_TOOLS, SUMMARIES, Tool
from engram_memory.host.cli import records
from engram_memory.host.cli.app import app

ROOT = Path(__file__).resolve().parents[1]


def _text(*names: str) -> str:
    return "\n".join((ROOT / name).read_text(encoding="utf-8") for name in names)


@pytest.mark.parametrize("tool", [tool.value for tool in ALL_TOOLS])
def test_every_tool_is_documented(tool: str) -> None:
    assert f"## {tool}" in _text("docs/tools.md")
    assert tool in _text("README.md")


def _generated_docs() -> list[Path]:
    """The docs with a cog block, found as `make docs` finds them: README.md and docs/*.md."""
    candidates = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    return [path for path in candidates if "[[[cog" in path.read_text(encoding="utf-8")]


def test_the_contract_holds_every_fact_the_tables_show() -> None:
    assert set(WHEN_RETURNED) == set(ErrorCode)
    assert set(PROTOCOL_FAULT_WHEN) == set(PROTOCOL_FAULT_MESSAGES)
    assert set(SUMMARIES) == set(ALL_TOOLS)
    assert set(PERFORMED_BY) | set(AGENT_OPERATIONS.values()) == set(Operation)
    for line in [*WHEN_RETURNED.values(), *PROTOCOL_FAULT_WHEN.values(), *SUMMARIES.values(), *PERFORMED_BY.values()]:
        assert line and "\n" not in line, line


def _cog_check(docs: list[Path]) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    cog = Cog()
    cog.set_output(stdout=out, stderr=err)
    argv = ["cog", "--check", "--diff", "--verbosity=1", "--check-fail-msg=run `make docs`", "-I", str(ROOT)]
    status = cog.main([*argv, *map(str, docs)])
    return status, out.getvalue() + err.getvalue()


def test_generated_tables_match_the_contract() -> None:
    docs = _generated_docs()
    names = {str(path.relative_to(ROOT)) for path in docs}
    assert {"README.md", "docs/tools.md", "docs/errors.md", "docs/lifecycle.md", "docs/cli-reference.md"} <= names
    status, said = _cog_check(docs)
    assert status == 0, (
        "a generated table or reference in README.md or docs/ no longer matches the code: run `make docs` "
        f"(cog exited {status})\n{said}"
    )


def test_a_command_whose_help_changed_without_make_docs_fails_the_check(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(records.expire_due_command, "__doc__", "Expire what is due (said another way).")
    status, said = _cog_check([ROOT / "docs" / "cli-reference.md"])
    assert status != 0 and "said another way" in said and "run `make docs`" in said


@pytest.mark.parametrize("tool", ALL_TOOLS, ids=[tool.value for tool in ALL_TOOLS])
def test_each_tool_section_states_its_kind_and_inputs(tool: Tool) -> None:
    """The per-tool prose of docs/tools.md is not generated; its heading and `In:` line must still agree."""
    sections = {part.split("\n", 1)[0]: part for part in _text("docs/tools.md").split("\n## ")[1:]}
    (heading,) = [head for head in sections if head.split(" ", 1)[0] == tool.value]
    assert ("read-only" in heading) == (tool in READ_ONLY_TOOLS), heading
    assert ("gated" in heading) == (tool in ALWAYS_GATED_TOOLS), heading
    inputs = sections[heading].split("\nIn: ", 1)[1].split("\nOut: ", 1)[0]
    for name in schema_for_validation(tool)["properties"]:
        assert re.search(rf"`{name}\b", inputs), f"docs/tools.md: {tool.value}'s In: line lacks `{name}`"


@pytest.mark.parametrize("code", [code.value for code in ErrorCode])
def test_every_error_code_is_documented(code: str) -> None:
    assert f"| {code} |" in _text("docs/errors.md")


def _commands() -> list[str]:
    """Every leaf command of the real CLI, groups included ("records rewind", "audit export")."""
    found: list[str] = []

    def walk(command: object, prefix: list[str]) -> None:
        children = getattr(command, "commands", None)
        if not children:
            found.append(" ".join(prefix))
            return
        for name, child in sorted(children.items()):
            walk(child, [*prefix, name])

    walk(get_command(app), [])
    return found


@pytest.mark.parametrize("command", _commands())
def test_every_cli_command_is_documented(command: str) -> None:
    assert f"engram-memory {command}" in _text("docs/operations.md")


def test_readme_leads_with_the_two_commands() -> None:
    head = (ROOT / "README.md").read_text(encoding="utf-8")[:400]
    assert "make demo" in head and "make test" in head
