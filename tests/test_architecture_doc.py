"""docs/architecture.md answers "where is …?" with paths that exist, and leaves no package unnamed."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "engram_memory"


def _where_is_paths() -> list[str]:
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text.split("## Where is…", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| where is")]
    paths = [path for row in rows for path in re.findall(r"`([^`]+)`", row.split("|")[2])]
    assert len(rows) >= 30 and paths, "the where-is table is missing or empty"
    return paths


def test_every_path_in_the_where_is_table_exists() -> None:
    missing = [path for path in _where_is_paths() if not (ROOT / path).exists()]
    assert not missing, f"docs/architecture.md names paths that do not exist: {missing}"


def test_every_package_is_named_in_the_where_is_table() -> None:
    named = [(ROOT / path).resolve() for path in _where_is_paths()]
    packages = sorted(init.parent for init in PACKAGE.rglob("__init__.py") if init.parent != PACKAGE)
    unnamed = [
        str(package.relative_to(ROOT))
        for package in packages
        if not any(path == package or package in path.parents for path in named)
    ]
    assert not unnamed, f"packages no row of the where-is table points into: {unnamed}"


def test_no_module_is_longer_than_450_lines() -> None:
    long = {
        str(path.relative_to(ROOT)): lines
        for path in PACKAGE.rglob("*.py")
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > 450
    }
    assert not long, f"modules over 450 lines (split them by concept): {long}"


def test_the_host_reaches_the_store_only_through_the_engine_and_backends() -> None:
    host = PACKAGE / "host"
    reaching = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in host.rglob("*.py")
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if "engine.deps" in line or ".deps." in line
    ]
    assert not reaching, f"host code reaching into the engine's internals: {reaching}"
    branching = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in host.rglob("*.py")
        if path.parent.name != "backends" and path.name not in ("settings.py", "postgres_home.py")
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if re.search(r"\bif\b.*(is_postgres|POSTGRES_STORE|SQLITE_STORE|is_postgres_url)", line)
    ]
    assert not branching, f"host code branching on the kind of store outside host/backends/: {branching}"
