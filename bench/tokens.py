"""What the six tool definitions cost a model, and the least they could cost under the contract.

Counts o200k_base tokens (the npm package `gpt-tokenizer` in tests/node, which `make test` installs) of
the tool list a client receives for a binding that grants all six tools, of the same list with every
sentence of prose and the titles removed (what the contract and issue 19 still require: the names, the
closed schemas, the annotations, the bound purpose_ref and the worked examples), and of the schemas
alone. The search answers are measured on a real server by tests/mcp/test_token_budget.py.

    .venv/bin/python bench/tokens.py [--json]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

from engram_memory.contract.binding import Binding
from engram_memory.contract.tools import ALL_TOOLS, Tool
from engram_memory.mcp import tools as tool_list

COUNTER = Path(__file__).parents[1] / "tests" / "node" / "count-tokens.mjs"
PURPOSE = "purpose:bench"


def _wire(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _count(texts: list[str]) -> list[int]:
    node = shutil.which("node")
    if node is None or not (COUNTER.parent / "node_modules" / "gpt-tokenizer").is_dir():
        raise SystemExit("needs Node and tests/node installed: run `make test` once (npm ci --prefix tests/node)")
    done = subprocess.run([node, str(COUNTER)], input=json.dumps(texts), capture_output=True, text=True, check=True)
    return [int(n) for n in json.loads(done.stdout)]


def measure() -> dict[str, int]:
    binding = Binding("t", "tenant", "ws", "p", "a", "s", PURPOSE, frozenset(t.value for t in ALL_TOOLS), False, 0, 1)
    listed = [t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in tool_list.tool_definitions(binding)]
    floor: list[dict[str, Any]] = []
    for tool in listed:
        which = Tool(tool["name"])
        description = f'Your purpose_ref is "{PURPOSE}".'
        if which is Tool.CAPTURE:
            description += " Example: " + _wire(tool_list.capture_example(PURPOSE))
        elif which in tool_list._SHORT_EXAMPLES:
            description += " Example: " + _wire(tool_list._SHORT_EXAMPLES[which])
        floor.append({k: tool[k] for k in ("name", "inputSchema", "annotations")} | {"description": description})
    schemas = [tool["inputSchema"] for tool in listed]
    now, least, only = _count([_wire(listed), _wire(floor), _wire(schemas)])
    return {"tools_list_tokens": now, "tools_list_without_prose_tokens": least, "schemas_only_tokens": only}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    figures = measure()
    if parser.parse_args().json:
        print(json.dumps(figures))
        return
    print("| what a model reads | o200k tokens |\n|---|---|")
    for name, value in figures.items():
        print(f"| {name.removesuffix('_tokens').replace('_', ' ')} | {value:,} |")


if __name__ == "__main__":
    main()
