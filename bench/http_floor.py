"""The floor under the aggregate write figure of bench/scale.py: what `serve --http` processes built on the
official SDK can answer on this machine when the engine behind them does (almost) nothing.

Issue 17 asks for 500 capture+admission pairs/s from 8 agents on 8 tenants through 2 `serve --http`
processes. This separates what the SDK's HTTP stack, the clients and PostgreSQL's commits cost from what
the engine costs: the same app (`build_server`, `build_http_app`, the connection guard, the access-log
middleware), the same lean clients (raw_mcp.py) sending the same pairs one call at a time, but an engine
that answers constant envelopes after `--inserts` rows per call written to PostgreSQL (each group of
calls that arrive together in one transaction, as the real engine commits them; 0: no store at all).

Prints, per `--inserts` value: pairs per second, and the CPU a pair cost the clients, the servers and
PostgreSQL. Run it alone: it shares the machine's cores between what it measures.

    .venv/bin/python bench/http_floor.py --store "postgresql://postgres@/engram_bench?host=DIR"
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import secrets
import socket
import time
from collections.abc import Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
import psycopg
import uvicorn
from psycopg_pool import ConnectionPool

from engram_memory.contract.binding import Binding
from engram_memory.contract.ids import new_audit_id, new_candidate_id, new_record_id
from engram_memory.contract.tools import ALL_TOOLS
from engram_memory.engine.engine import AgentCall
from engram_memory.host.serve.http_guard import ConnectionGuard, GuardSettings, guarded_protocol
from engram_memory.host.serve.observability import AccessLog
from engram_memory.mcp.http import build_http_app, request_binding
from engram_memory.mcp.server import build_server
from raw_mcp import RawToolClient
from scale import DEFAULT_CORPUS, Corpus, capture_arguments

TABLE = "http_floor_rows"
CAPTURE, ADMISSION = "engram_memory_capture", "engram_memory_request_admission"


class FloorEngine:
    """Answers capture and admission with constant-shaped envelopes after writing `inserts` rows a call."""

    def __init__(self, store: str | None, inserts: int) -> None:
        self._inserts = inserts
        self._pool = ConnectionPool(store, min_size=4, max_size=4, open=True) if store and inserts else None

    def handle(self, binding: Binding | None, tool: str, arguments: object) -> dict[str, Any]:
        return self.handle_group([AgentCall(binding, tool, arguments)])[0]

    def handle_group(self, calls: Sequence[AgentCall]) -> list[dict[str, Any]]:
        if self._pool is not None:
            with self._pool.connection() as connection, connection.transaction():
                for call in calls:
                    tenant = call.binding.tenant if call.binding else ""
                    body = json.dumps(call.arguments)
                    for _ in range(self._inserts):
                        connection.execute(
                            f"INSERT INTO {TABLE} (tenant, key, body) VALUES (%s, %s, %s)",
                            (tenant, secrets.token_hex(8), body),
                        )
        return [_envelope(call) for call in calls]


def _envelope(call: AgentCall) -> dict[str, Any]:
    arguments = call.arguments if isinstance(call.arguments, dict) else {}
    candidate = str(arguments.get("candidate_id") or new_candidate_id())
    if call.tool_name == CAPTURE:
        value: dict[str, Any] = {
            "status": "committed_pending",
            "candidate_id": candidate,
            "record_digest": "sha256:" + "0" * 64,
            "cursor": 1,
            "transaction_receipt_digest": "sha256:" + "1" * 64,
        }
    else:
        value = {
            "outcome": {"status": "accepted", "candidate_id": candidate, "record_id": new_record_id()},
            "replayed": False,
        }
    return {
        "ok": True,
        "output": {"schema_version": 1, "value": value},
        "auditId": new_audit_id(),
        "redactionClass": "high",
    }


def _binding(tenant: str) -> Binding:
    return Binding(
        token_id=f"tok-{tenant}",
        tenant=tenant,
        workspace="w",
        principal="p",
        agent_id="a",
        session="s",
        purpose_ref="purpose:floor",
        grants=frozenset(tool.value for tool in ALL_TOOLS),
        confirm_mutations=False,
        issued_at_ms=0,
        expires_at_ms=2**50,
    )


def _serve(sock: socket.socket, store: str | None, inserts: int) -> None:
    server = build_server(FloorEngine(store, inserts), request_binding)  # type: ignore[arg-type]
    app = build_http_app(server, _binding, host="127.0.0.1", port=sock.getsockname()[1])
    config = uvicorn.Config(
        AccessLog(app, None, log=False),
        http=guarded_protocol(ConnectionGuard(GuardSettings())),
        lifespan="on",
        log_config=None,
        log_level="warning",
        access_log=False,
        server_header=False,
    )
    uvicorn.Server(config).run(sockets=[sock])


def _cpu_s(pid: int | str) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text(encoding="ascii").rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _postgres_cpu_s() -> float:
    total = 0.0
    for process in Path("/proc").iterdir():
        if not process.name.isdigit():
            continue
        try:
            if (process / "comm").read_text(encoding="ascii").strip() == "postgres":
                total += _cpu_s(process.name)
        except OSError:
            continue
    return total


def measure(store: str | None, inserts: int, processes: int, clients: int, seconds: float) -> dict[str, float]:
    """One load: `clients` agents round-robin over `processes` servers; pairs/s and CPU ms a pair."""
    sockets = [socket.create_server(("127.0.0.1", 0)) for _ in range(processes)]
    servers = [multiprocessing.Process(target=_serve, args=(sock, store, inserts)) for sock in sockets]
    for server in servers:
        server.start()
    corpus = Corpus(DEFAULT_CORPUS)
    urls = [f"http://127.0.0.1:{sock.getsockname()[1]}/mcp" for sock in sockets]
    done: dict[str, float] = {}

    async def load() -> None:
        async with AsyncExitStack() as stack:
            agents = []
            for n in range(clients):
                agent = RawToolClient(urls[n % processes], f"t{n:02d}")
                stack.push_async_callback(agent.close)
                agents.append(agent)
            await _until_ready(agents)
            pairs = [0] * clients
            deadline = time.monotonic() + seconds

            async def agent_loop(n: int) -> None:
                k = 0
                while time.monotonic() < deadline:
                    key = f"floor-{n:02d}-{k:09d}"
                    arguments = capture_arguments(corpus.note(), key, 1_900_000_000_000 + k)
                    captured = _value(await agents[n].call_tool(CAPTURE, arguments))
                    admission = {"candidate_id": captured["candidate_id"], "idempotency_key": key + "-a"}
                    _value(await agents[n].call_tool(ADMISSION, admission))
                    pairs[n] += 1
                    k += 1

            postgres0, servers0 = _postgres_cpu_s(), [_cpu_s(s.pid or 0) for s in servers]
            client0, started = time.process_time(), time.perf_counter()
            async with anyio.create_task_group() as group:
                for n in range(clients):
                    group.start_soon(agent_loop, n)
            elapsed = time.perf_counter() - started
            count = sum(pairs)
            done.update(
                pairs_per_s=count / elapsed,
                client_ms=1000 * (time.process_time() - client0) / count,
                servers_ms=1000 * sum(_cpu_s(s.pid or 0) - c for s, c in zip(servers, servers0, strict=True)) / count,
                postgres_ms=1000 * (_postgres_cpu_s() - postgres0) / count,
            )

    try:
        anyio.run(load)
    finally:
        for server in servers:
            server.terminate()
            server.join()
    return done


def _value(envelope: dict[str, Any]) -> dict[str, Any]:
    if not envelope.get("ok"):
        raise SystemExit(f"the floor's server refused a call: {envelope}")
    value: dict[str, Any] = envelope["output"]["value"]
    return value


async def _until_ready(agents: list[RawToolClient]) -> None:
    deadline = time.monotonic() + 30
    for agent in agents:
        while True:
            try:
                await agent.call_tool(ADMISSION, {"candidate_id": new_candidate_id(), "idempotency_key": "ready"})
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                await anyio.sleep(0.1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", help="a postgresql:// URL the rows go to (a table of their own, dropped after)")
    parser.add_argument("--inserts", default="0,1,3", help="rows a call writes, comma-separated: one load each")
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=15.0)
    args = parser.parse_args()
    counts = [int(n) for n in args.inserts.split(",")]
    if any(counts) and not args.store:
        parser.error("--inserts above 0 needs --store postgresql://…")
    if args.store:
        with psycopg.connect(args.store, autocommit=True) as admin:
            admin.execute(f"DROP TABLE IF EXISTS {TABLE}")
            admin.execute(f"CREATE TABLE {TABLE} (tenant text, key text, body jsonb, PRIMARY KEY (tenant, key))")
    try:
        print("| rows a call | pairs/s | client ms/pair | servers ms/pair | PostgreSQL ms/pair |")
        print("|---|---|---|---|---|")
        for inserts in counts:
            row = measure(args.store, inserts, args.processes, args.clients, args.seconds)
            print(
                f"| {inserts} | {row['pairs_per_s']:.0f} | {row['client_ms']:.2f} | {row['servers_ms']:.2f} "
                f"| {row['postgres_ms']:.2f} |",
                flush=True,
            )
    finally:
        if args.store:
            with psycopg.connect(args.store, autocommit=True) as admin:
                admin.execute(f"DROP TABLE IF EXISTS {TABLE}")


if __name__ == "__main__":
    main()
