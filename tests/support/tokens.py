"""Token counts with a real tokenizer: o200k_base, through the npm package `gpt-tokenizer` (tests/node).

The package ships its rank tables inside it, so nothing is fetched when the tests run; `make test`
installs it from the npm registry (tests/node/package-lock.json).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

NODE_TOOLS = Path(__file__).parents[1] / "node"


def o200k_counts(texts: list[str]) -> list[int]:
    """How many o200k_base tokens each text is; skips only when Node itself is absent."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("Node is not installed (make test installs it: .ci/system-packages)")
    if not (NODE_TOOLS / "node_modules" / "gpt-tokenizer").is_dir():
        raise AssertionError("tests/node is not installed: run `make test` (it runs npm ci --prefix tests/node)")
    done = subprocess.run(
        [node, str(NODE_TOOLS / "count-tokens.mjs")],
        input=json.dumps(texts),
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    counts = json.loads(done.stdout)
    assert isinstance(counts, list) and len(counts) == len(texts)
    return [int(count) for count in counts]


def o200k(text: str) -> int:
    return o200k_counts([text])[0]
