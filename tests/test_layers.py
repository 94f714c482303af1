"""Imports only point down: contract ← engine ← stores; mcp and host on top; no cycles."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "engram_memory"
ALLOWED = {
    "contract": {"contract"},
    "engine": {"contract", "engine"},
    "stores": {"contract", "engine", "stores"},
    "mcp": {"contract", "engine", "mcp"},
    "embeddings": {"contract", "engine", "embeddings"},
    "host": {"contract", "engine", "stores", "mcp", "embeddings", "host"},
    "client": {"client"},
}


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("engram_memory."):
            found.add(node.module.split(".")[1])
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("engram_memory."):
                    found.add(alias.name.split(".")[1])
    return found


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_layer_imports_only_point_down(layer: str) -> None:
    for path in (PACKAGE / layer).rglob("*.py"):
        wrong = _imports(path) - ALLOWED[layer] - {"__init__"}
        assert not wrong, f"{path.relative_to(PACKAGE)} imports {sorted(wrong)}"


def test_importing_the_package_stays_cheap() -> None:
    import subprocess
    import sys

    code = (
        "import sys, engram_memory; print(sorted(m for m in ('mcp', 'jsonschema', 'cryptography') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
