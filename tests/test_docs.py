"""The docs keep up with the code: every tool, error code and CLI command is documented."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.main import get_command

from engram_memory.contract.errors import ErrorCode
from engram_memory.contract.tools import ALL_TOOLS
from engram_memory.host.cli.app import app

ROOT = Path(__file__).resolve().parents[1]


def _text(*names: str) -> str:
    return "\n".join((ROOT / name).read_text(encoding="utf-8") for name in names)


@pytest.mark.parametrize("tool", [tool.value for tool in ALL_TOOLS])
def test_every_tool_is_documented(tool: str) -> None:
    assert f"## {tool}" in _text("docs/tools.md")
    assert tool in _text("README.md")


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
