"""The shape a newcomer can read: every module says its job first, and no function runs past 60 lines of logic.

A function's lines of logic are the lines of its body that hold code: its docstring, blank lines and
comments, the functions and classes defined inside it (measured on their own) and the inside of a literal
table made of constants and names do not count, so a command's option declarations and a schema's literal
never push it over.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "src" / "engram_memory"
MAX_LOGIC_LINES = 60
_LITERAL_PARTS = (ast.Constant, ast.Dict, ast.List, ast.Tuple, ast.Set, ast.Name, ast.Attribute, ast.Load)


def _modules() -> list[Path]:
    return sorted(SOURCE.rglob("*.py"))


def _functions(tree: ast.AST) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield node


def _is_literal_table(node: ast.AST) -> bool:
    return isinstance(node, ast.Dict | ast.List | ast.Tuple | ast.Set) and all(
        isinstance(part, _LITERAL_PARTS) for part in ast.walk(node)
    )


def logic_lines(function: ast.FunctionDef | ast.AsyncFunctionDef, source: list[str]) -> int:
    body = function.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # the docstring
    lines: set[int] = set()
    for statement in body:
        lines.update(range(statement.lineno, (statement.end_lineno or statement.lineno) + 1))
    for statement in body:
        for node in ast.walk(statement):
            end = getattr(node, "end_lineno", None) or getattr(node, "lineno", 0)
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                lines.difference_update(range(node.lineno, end + 1))
            elif _is_literal_table(node):
                lines.difference_update(range(node.lineno + 1, end))
    return sum(1 for number in lines if source[number - 1].strip() and not source[number - 1].lstrip().startswith("#"))


def _too_long(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    source = text.splitlines()
    found = []
    for function in _functions(ast.parse(text)):
        count = logic_lines(function, source)
        if count > MAX_LOGIC_LINES:
            where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name
            found.append(f"{where}:{function.lineno} {function.name}: {count} lines of logic")
    return found


def test_no_function_runs_past_sixty_lines_of_logic() -> None:
    too_long = [line for path in _modules() for line in _too_long(path)]
    assert not too_long, "\n".join(too_long)


def test_every_module_opens_with_its_job() -> None:
    """An empty package marker says nothing and need not."""
    silent = []
    for path in _modules():
        text = path.read_text(encoding="utf-8")
        if text.strip() and ast.get_docstring(ast.parse(text)) is None:
            silent.append(str(path.relative_to(ROOT)))
    assert not silent, silent


def test_the_measure_counts_logic_and_leaves_out_literals_and_nested_functions(tmp_path: Path) -> None:
    logic = "\n".join(f"    x{n} = call({n})" for n in range(61))
    table = "\n".join(f"        'key{n}': {n}," for n in range(200))
    nested = "\n".join(f"        y{n} = call({n})" for n in range(100))
    planted = tmp_path / "planted.py"
    planted.write_text(
        f'"""A planted module."""\n\ndef long():\n    """Docs."""\n{logic}\n\n'
        f"def table():\n    return {{\n{table}\n    }}\n\n"
        f"def outer():\n    def inner():\n{nested}\n    return inner\n",
        encoding="utf-8",
    )
    tree = ast.parse(planted.read_text())
    counts = {function.name: logic_lines(function, planted.read_text().splitlines()) for function in _functions(tree)}
    assert counts == {"long": 61, "table": 2, "outer": 1, "inner": 100}


def test_a_planted_long_function_is_named(tmp_path: Path) -> None:
    logic = "\n".join(f"    x{n} = call({n})" for n in range(61))
    planted = tmp_path / "planted.py"
    planted.write_text(f'"""A planted module."""\n\ndef long():\n{logic}\n', encoding="utf-8")
    assert _too_long(planted) == ["planted.py:3 long: 61 lines of logic"]
