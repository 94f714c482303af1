"""`engram-memory demo`: the product's main job, end to end, on a throwaway home.

A real MCP client launches the real server over stdio and plays a scripted agent; the host's steps
(init, bind, approve) run the real CLI in their own processes. The transcript marks who did what.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.text import Text

from engram_memory.host.language.catalogue import _
from mcp import Client, StdioServerParameters

PURPOSE = "purpose:team-handbook"
FACT = (
    "Production deploys are rolled back by switching the blue-green router back to the previous colour; "
    "never hot-patch a live node."
)


def _cli(home: Path, *args: str) -> str:
    command = [sys.executable, "-m", "engram_memory", *args, "--home", str(home)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)  # noqa: S603
    if done.returncode != 0:
        raise RuntimeError(f"engram-memory {args[0]} failed: {done.stderr.strip()}")
    return done.stdout


class Transcript:
    def __init__(self, console: Console) -> None:
        self.console = console

    def host(self, text: str) -> None:
        self.console.print(Text.assemble((_("HOST").ljust(6), "bold magenta"), " ", text), highlight=False)

    def agent(self, text: str) -> None:
        self.console.print(Text.assemble((_("AGENT").ljust(6), "bold cyan"), " ", text), highlight=False)

    def server(self, text: str) -> None:
        self.console.print(Text.assemble(("  ←    ", "green"), text), highlight=False)


def _payload() -> dict[str, Any]:
    return {
        "schema_version": 2,
        "purpose_ref": PURPOSE,
        "valid_time": {"t": 1_767_225_600_000},
        "components": [
            {"component_id": "decision", "kind": "decision", "text": FACT, "citation_ids": ["runbook"]},
            {
                "component_id": "why",
                "kind": "context",
                "text": "Hot patches drifted from the image twice and caused the March incident.",
                "citation_ids": ["runbook"],
            },
        ],
        "primary_component_id": "decision",
        "primary_event": {"at": 1_767_225_600_000, "type_ref": "event:decision-made", "citation_id": "runbook"},
        "citations": [
            {
                "citation_id": "runbook",
                "source_ref": "doc:ops-runbook",
                "locator": {"scheme": "document", "value": "ops-runbook#rollback"},
                "content_digest": "sha256:" + hashlib.sha256(FACT.encode()).hexdigest(),
            }
        ],
    }


async def _call(client: Client, log: Transcript, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    envelope: dict[str, Any] = result.structured_content
    if envelope["ok"]:
        return dict(envelope["output"]["value"])
    log.server(
        _("error {code} (retriable: {retriable})").format(
            code=envelope["error"]["code"], retriable=envelope["error"]["retriable"]
        )
    )
    return {"error": envelope["error"]["code"]}


def _bind(home: Path) -> str:
    return _cli(
        home,
        "bind",
        "--tenant", "acme",
        "--workspace", "platform-team",
        "--principal", "alice@acme",
        "--agent", "claude-code",
        "--session", "demo-1",
        "--purpose", PURPOSE,
        "--all-tools",
        "--expires-in", "1h",
    ).strip()  # fmt: skip


async def _search(client: Client, log: Transcript, query: str) -> list[dict[str, Any]]:
    found = await _call(client, log, "engram_memory_search", {"query": query, "purpose_ref": PURPOSE})
    log.agent(_('search "{query}"').format(query=query))
    records: list[dict[str, Any]] = found["records"]
    return records


async def _capture_and_admit(client: Client, log: Transcript) -> str:
    captured = await _call(
        client,
        log,
        "engram_memory_capture",
        {
            "idempotency_key": "demo-capture-rollback-0001",
            "payload": _payload(),
            "evidence": {
                "evidence_ref": "review:pr-4711",
                "evidence_digest": "sha256:" + hashlib.sha256(b"pr-4711").hexdigest(),
                "citation_ids": ["runbook"],
            },
        },
    )
    log.agent(_("capture a decision with its rationale and a citation"))
    log.server(
        _("{status} {candidate_id} (encrypted, not yet searchable)").format(
            status=captured["status"], candidate_id=captured["candidate_id"]
        )
    )
    admitted = await _call(
        client,
        log,
        "engram_memory_request_admission",
        {"candidate_id": captured["candidate_id"], "idempotency_key": "demo-admit-rollback-0001"},
    )
    outcome = admitted["outcome"]
    log.agent("request_admission")
    log.server(
        _("{status} → {record_id} (host policy: secret detector, citations)").format(
            status=outcome["status"], record_id=outcome["record_id"]
        )
    )
    return str(outcome["record_id"])


async def _forget_with_approval(client: Client, log: Transcript, home: Path, record_id: str) -> None:
    forget_args = {
        "record_id": record_id,
        "idempotency_key": "demo-forget-rollback-0001",
        "reason_ref": "ticket:OPS-1234",
    }
    log.agent(_("forget {record_id} (reason ticket:OPS-1234)").format(record_id=record_id))
    refused = await _call(client, log, "engram_memory_forget", forget_args)
    if refused.get("error") != "gate_failed":
        raise RuntimeError("forget ran without a human's approval")
    log.server(_("the server left a confirmation request for the host"))
    request = json.loads(_cli(home, "confirmations", "list", "--json"))[0]
    log.host(
        _("engram-memory confirmations list  → {id}: {tool} {target}").format(
            id=request["id"], tool=request["tool"], target=request["target"]
        )
    )
    _cli(home, "confirmations", "approve", request["id"])
    log.host(_("engram-memory confirmations approve {id}  (a human said yes)").format(id=request["id"]))
    forgotten = await _call(client, log, "engram_memory_forget", forget_args)
    log.agent(_("forget again: the identical call with the same idempotency_key"))
    receipt = forgotten["receipt"]
    log.server(
        _("{from_state} → {to_state}; projection invalidation {projection_invalidation}").format(
            from_state=receipt["from_state"],
            to_state=receipt["to_state"],
            projection_invalidation=forgotten["projection_invalidation"],
        )
    )


async def _agent_session(client: Client, log: Transcript, home: Path) -> None:
    tools = await client.list_tools()
    log.agent(_("tools/list → {tools}").format(tools=", ".join(tool.name for tool in tools.tools)))
    query = "how do we roll back a production deploy?"
    log.server(
        _("{count} records: nothing known yet, so capture it").format(count=len(await _search(client, log, query)))
    )
    record_id = await _capture_and_admit(client, log)
    top = (await _search(client, log, query))[0]
    log.server(
        _("rank {rank}: {record_id} score {score}").format(
            rank=top["rank"], record_id=top["record"]["record_id"], score=top["score"]
        )
    )
    log.server(f"  “{top['record']['components'][0]['text'][:90]}…”")
    read = await _call(client, log, "engram_memory_get", {"record_id": record_id, "purpose_ref": PURPOSE})
    log.agent(_("get {record_id}").format(record_id=record_id))
    receipt = read["read_receipt"]
    log.server(
        _("read receipt {digest}… through cursor {cursor}").format(
            digest=receipt["receipt_digest"][:23], cursor=receipt["validated_through_cursor"]
        )
    )
    await _forget_with_approval(client, log, home, record_id)
    remaining = await _search(client, log, query)
    log.server(_("{count} records: the forgotten memory is gone").format(count=len(remaining)))
    if remaining:
        raise RuntimeError("a forgotten record was still found")


async def run_demo(console: Console) -> int:
    log = Transcript(console)
    console.rule(_("engram-memory demo: one agent session over MCP stdio"))
    with tempfile.TemporaryDirectory(prefix="engram-demo-") as folder:
        home = Path(folder) / "home"
        _cli(home, "init")
        log.host(_("engram-memory init                 → fresh store and keys in {home}").format(home=home))
        token = _bind(home)
        log.host(_("engram-memory bind --all-tools    → a signed binding for acme/platform-team, alice@acme"))
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "engram_memory", "serve", "--home", str(home)],
            env={"ENGRAM_BINDING": token},
        )
        log.host(_("engram-memory serve               → the MCP server starts over stdio with that binding"))
        async with Client(params) as client:
            await _agent_session(client, log, home)
    console.rule(_("demo finished: every step above went through the real server and CLI"))
    return 0
