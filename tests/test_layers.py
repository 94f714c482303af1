"""Imports only point down: contract ← engine ← stores; mcp and host on top; no cycles. And what the
architecture page promises of every module: the stores take from the engine only its ports, only the
host's settings read ENGRAM_* variables, and no module keeps state that changes while it runs."""

from __future__ import annotations

import ast
import functools
import re
import subprocess
import sys
from collections.abc import Iterator, Mapping
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
# What of the engine a store may import: its ports, and the tokenizer whose terms the postings keep.
STORES_TAKE_FROM_THE_ENGINE = ("engram_memory.engine.ports", "engram_memory.engine.recall.text")
# The one module state kept on purpose: the process's embedding model, loaded once and shared by every
# engine of the process (embeddings/loader.py).
KEPT_STATE = {("embeddings/loader.py", "_chosen")}
_MUTABLE_CALLS = {"dict", "list", "set", "defaultdict", "OrderedDict", "Counter", "deque", "bytearray"}
_ENGRAM_VARIABLE = re.compile(r"ENGRAM_[A-Z0-9_]+")


@functools.cache
def _tree(path: Path) -> ast.Module:
    """Each module parsed once for the whole file's tests."""
    return ast.parse(path.read_text(encoding="utf-8"))


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _imported(tree: ast.AST, *, names: bool = False) -> Iterator[str]:
    """Every engram_memory module a source imports, at its top or inside a function (a lazy import still
    makes the importer depend on it); `names`: with each name imported from one, which may be a module."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("engram_memory"):
            yield node.module
            if names:
                yield from (f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names if alias.name.startswith("engram_memory"))


def _imports(path: Path) -> set[str]:
    return {name.split(".")[1] for name in _imported(_tree(path)) if "." in name}


def import_graph() -> dict[str, set[str]]:
    """Module → the modules it imports (a name imported from a package counts as its module when it is
    one, else as the package); a package's own parents are not counted, as Python imports them anyway."""
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets = set()
        for imported in _imported(_tree(path), names=True):
            module = imported
            while module and module not in modules:
                module = module.rpartition(".")[0]
            if module and module != name and not name.startswith(module + "."):
                targets.add(module)
        graph[name] = targets
    return graph


def cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The graph's strongly connected parts of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, targets = work[-1]
            target = next(targets, None)
            if target is not None:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph.get(target, ())))))
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                part = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    part.append(member)
                    if member == node:
                        break
                if len(part) > 1:
                    found.append(sorted(part))
    return found


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_layer_imports_only_point_down(layer: str) -> None:
    for path in (PACKAGE / layer).rglob("*.py"):
        wrong = _imports(path) - ALLOWED[layer] - {"__init__"}
        assert not wrong, f"{path.relative_to(PACKAGE)} imports {sorted(wrong)}"


def test_no_module_imports_itself_back() -> None:
    graph = import_graph()
    assert sum(len(targets) for targets in graph.values()) > len(graph)  # the graph saw the imports
    assert cycles(graph) == []


def test_a_cycle_is_found_however_long() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set()}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_stores_take_from_the_engine_only_its_ports() -> None:
    for path in (PACKAGE / "stores").rglob("*.py"):
        for name in _imported(_tree(path)):
            if name.startswith("engram_memory.engine") and name != "engram_memory.engine":
                assert name.startswith(STORES_TAKE_FROM_THE_ENGINE), f"{path.relative_to(PACKAGE)} imports {name}"


def engram_variables_read(tree: ast.Module) -> list[str]:
    """The ENGRAM_* names a source mentions other than as a key of a dict it builds (a child process's
    environment): a name is only ever written like that to read it."""
    keys = {id(key) for node in ast.walk(tree) if isinstance(node, ast.Dict) for key in node.keys if key is not None}
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and _ENGRAM_VARIABLE.fullmatch(node.value)
        and id(node) not in keys
    ]


def test_only_the_settings_read_engram_variables() -> None:
    readers = {str(path.relative_to(PACKAGE)) for path in PACKAGE.rglob("*.py") if engram_variables_read(_tree(path))}
    assert readers == {"host/settings.py"}
    assert engram_variables_read(ast.parse('import os\nos.environ.get("ENGRAM_CACHE")')) == ["ENGRAM_CACHE"]
    assert engram_variables_read(ast.parse('run(env={"ENGRAM_BINDING": token})')) == []


def module_state(tree: ast.Module) -> list[str]:
    """The names a module binds at its top to a container that can change (a dict, list or set display,
    or a call of their constructors), and the names its functions declare `global`."""
    found = []
    for node in tree.body:
        if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
            target = node.targets[0] if isinstance(node, ast.Assign) else node.target
            value = node.value
            call = ast.unparse(value.func).rpartition(".")[2] if isinstance(value, ast.Call) else ""
            if isinstance(value, ast.Dict | ast.List | ast.Set | ast.DictComp | ast.ListComp | ast.SetComp) or (
                call in _MUTABLE_CALLS
            ):
                found.append(ast.unparse(target))
    found += [name for node in ast.walk(tree) if isinstance(node, ast.Global) for name in node.names]
    return [name for name in found if name != "__all__"]


def test_no_module_keeps_state_that_changes() -> None:
    state = {
        (str(path.relative_to(PACKAGE)), name) for path in PACKAGE.rglob("*.py") for name in module_state(_tree(path))
    }
    assert state == KEPT_STATE
    planted = "TABLE = {'a': 1}\nNAMES: list[str] = []\nSEEN = set()\nFROZEN = frozenset({1})\n"
    assert module_state(ast.parse(planted + "def f():\n    global COUNT\n")) == ["TABLE", "NAMES", "SEEN", "COUNT"]


def test_importing_the_package_stays_cheap() -> None:
    code = (
        "import sys, engram_memory; print(sorted(m for m in ('mcp', 'jsonschema', 'cryptography') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
