"""What the benchmarks share: a binding with every tool for one workspace, and a call that must succeed."""

from __future__ import annotations

import secrets
import time
from typing import Any

from engram_memory.contract.tools import ALL_TOOLS
from engram_memory.engine.engine import Engine
from engram_memory.host.bindings import IssuedBinding, issue_binding
from engram_memory.host.keys.files import load_signing_key
from engram_memory.host.settings import HostPaths

# In every measurement's idempotency keys: a home kept for another run (`--home`) gets new writes from
# it, not replays of the last run's calls (which write nothing and would make a busy phase quiet).
RUN = secrets.token_hex(4)


def bench_binding(paths: HostPaths, *, tenant: str, workspace: str, purpose: str) -> Any:
    """A day-long binding of the home's own key with every tool and no confirmation for captures."""
    return bench_issued(paths, tenant=tenant, workspace=workspace, purpose=purpose).binding


def bench_issued(
    paths: HostPaths, *, tenant: str, workspace: str, purpose: str, session: str = "bench"
) -> IssuedBinding:
    """The binding of bench_binding with its signed token, for a server that verifies it."""
    return issue_binding(
        load_signing_key(paths),
        tenant=tenant,
        workspace=workspace,
        principal="bench",
        agent_id="bench-agent",
        session=session,
        purpose_ref=purpose,
        grants=frozenset(t.value for t in ALL_TOOLS),
        confirm_mutations=False,
        lifetime_s=86_400,
        now_s=int(time.time()),
    )


def value_of(engine: Engine, binding: Any, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """The call's value; a failure stops the benchmark with its error code."""
    envelope = engine.handle(binding, tool, arguments)
    if not envelope["ok"]:
        raise SystemExit(f"{tool} failed: {envelope['error']['code']}")
    value: dict[str, Any] = envelope["output"]["value"]
    return value


def language_table(rows: list[dict[str, Any]], keys: list[str]) -> list[str]:
    """A Markdown table of per-language rows (`language`, `channels`, then `keys`)."""
    lines = ["| language | channels | " + " | ".join(keys) + " |", "|---" * (len(keys) + 2) + "|"]
    for row in rows:
        lines.append(f"| {row['language']} | {row['channels']} | " + " | ".join(str(row[key]) for key in keys) + " |")
    return lines
