"""Several processes, one store: 3 `serve --http` processes, 8 concurrent clients, mixed mutations: 240 in make
test, 2,000 in make test-slow, 6,000 in make reliability.

Captures, admissions (some contested by two clients of one scope), withdrawals and forgets through the
human gate (approved by the in-process host engine or the host CLI), deliberate retries of an
idempotency key on a different process, and the same new key raced to two processes at once.
Afterwards `engram-memory verify` passes and the journal holds every acknowledged mutation exactly
once, at the cursor it was acknowledged with, with no other event and no gap; no candidate has two
records; candidate and record states are what the clients were told.

It runs once per store (the `paths` fixture: a SQLite file, a PostgreSQL database): the checks read
the store only through the engine's store port, the host CLI and the servers.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from engram_memory.engine import journal
from engram_memory.engine.engine import Engine
from engram_memory.engine.ports.rows import Scope
from engram_memory.host.compose import store_settings
from engram_memory.host.settings import HostPaths
from tests.mcp.helpers import ADMIT, CAPTURE, FORGET, WITHDRAW, HostCli, forget_args, ok_value, withdraw_args
from tests.reliability.scale import amount, report
from tests.support.homes import Issued, bind, engine_for
from tests.support.http_agents import HttpAgent, HttpServer
from tests.support.payloads import capture_args, unique_key

pytestmark = pytest.mark.stdio

SERVERS = 3
# Mutating calls per client: 8 x 30 = 240 by default (6,000 in make reliability), 8 x 250 = 2,000 in make test-slow.
CALLS_PER_CLIENT = amount(30, 750)
CALLS_PER_CLIENT_SLOW = 250
# Eight clients, each with its own binding; three share one scope and two another.
CLIENT_SCOPES = [
    Scope("tenant-a", "shared"),
    Scope("tenant-a", "shared"),
    Scope("tenant-a", "shared"),
    Scope("tenant-a", "pair"),
    Scope("tenant-a", "pair"),
    Scope("tenant-b", "solo-1"),
    Scope("tenant-b", "solo-2"),
    Scope("tenant-c", "solo-1"),
]
CLI_APPROVALS_PER_CLIENT = 2  # the first gated operations of each client go through the real host CLI
# An admission that lost a race to another client of the scope answers one of these.
LOST_RACE = frozenset({"ILLEGAL_TRANSITION", "ALREADY_TERMINAL"})
HANG_S = 900.0  # far beyond any run's length: only a client that stopped answering gets here


@dataclass(frozen=True)
class Effect:
    """One acknowledged mutation: the journal event it must have written, where, and at which cursor."""

    scope: Scope
    kind: str
    target: str
    cursor: int


@dataclass
class Tally:
    calls: int = 0
    retriable: int = 0
    replays: int = 0
    races: int = 0
    lost_admissions: int = 0
    cli_approvals: int = 0


class ScopePool:
    """Pending candidates that any client of the scope may try to admit (so two may race for one)."""

    def __init__(self, clients: int) -> None:
        self.shared = clients > 1
        self._lock = threading.Lock()
        self._pending: list[str] = []

    def add(self, candidate_id: str) -> None:
        with self._lock:
            self._pending.append(candidate_id)

    def take(self, rng: random.Random, *, leave: bool) -> str | None:
        """A pending candidate; `leave` keeps it in the pool, so another client may be admitting it too."""
        with self._lock:
            if not self._pending:
                return None
            index = rng.randrange(len(self._pending))
            return self._pending[index] if leave else self._pending.pop(index)

    def discard(self, candidate_id: str) -> None:
        with self._lock:
            if candidate_id in self._pending:
                self._pending.remove(candidate_id)


class Approver:
    """The human at the gate: approves the one open request for a target, in process or with the CLI."""

    def __init__(self, engine: Engine, host: HostCli) -> None:
        self._engine = engine
        self._host = host

    def approve(self, target: str, principal: str, *, with_cli: bool) -> None:
        requests = [
            row for row, _ in self._engine.confirmations() if row.target == target and row.actor.principal == principal
        ]
        assert len(requests) == 1, requests
        if with_cli:
            assert self._host.approve(requests[0].confirmation_id)["status"] == "approved"
        else:
            self._engine.approve_confirmation(
                requests[0].confirmation_id, decided_by="host:multiprocess", ttl_ms=60_000
            )


@dataclass
class Client:
    """One agent with its own binding and a connection to each server; a ledger of what it was told."""

    index: int
    scope: Scope
    agents: list[HttpAgent]
    pool: ScopePool
    approver: Approver
    rng: random.Random
    tally: Tally = field(default_factory=Tally)
    effects: dict[str, Effect] = field(default_factory=dict)  # by idempotency key: one logical operation each
    captured: set[str] = field(default_factory=set)
    private_pending: list[str] = field(default_factory=list)  # never pooled: only this client withdraws them
    accepted: dict[str, str] = field(default_factory=dict)  # record_id -> candidate_id
    current_records: list[str] = field(default_factory=list)
    withdrawn: set[str] = field(default_factory=set)
    forgotten: set[str] = field(default_factory=set)
    replayable: list[tuple[str, dict[str, Any], dict[str, Any], int]] = field(default_factory=list)

    @property
    def principal(self) -> str:
        return f"client-{self.index}"

    def server(self, avoid: int | None = None) -> int:
        choices = [n for n in range(SERVERS) if n != avoid]
        return self.rng.choice(choices)

    def send(self, tool: str, arguments: dict[str, Any], server: int) -> tuple[dict[str, Any], int]:
        """The envelope and the server that gave it; a retriable failure is retried, identically, elsewhere."""
        while True:
            self.tally.calls += 1
            envelope = self.agents[server].call(tool, arguments)
            if envelope["ok"] or not envelope["error"]["retriable"]:
                return envelope, server
            self.tally.retriable += 1
            assert self.tally.retriable < 50, envelope
            server = self.server(avoid=server)

    def record(self, key: str, kind: str, target: str, cursor: int) -> None:
        effect = Effect(self.scope, kind, target, cursor)
        assert self.effects.setdefault(key, effect) == effect, (key, self.effects[key], effect)

    # -- operations ------------------------------------------------------------------------------
    def capture(self, *, private: bool | None = None) -> None:
        """`private`: keep the candidate for this client's withdrawals (None: one time in four)."""
        key = unique_key(f"mp{self.index}-capture")
        arguments = capture_args(f"Decision {key} of client {self.index}: keep the runbook current.", key=key)
        envelope, server = self.send(CAPTURE, arguments, self.server())
        self._captured(key, arguments, ok_value(envelope), server, private=private)

    def _captured(
        self, key: str, arguments: dict[str, Any], value: dict[str, Any], server: int, *, private: bool | None = None
    ) -> None:
        candidate_id = value["candidate_id"]
        self.record(key, journal.CANDIDATE_CAPTURED, candidate_id, value["cursor"])
        self.captured.add(candidate_id)
        self.replayable.append((CAPTURE, arguments, value, server))
        keep = self.rng.random() < 0.25 if private is None else private
        if keep:
            self.private_pending.append(candidate_id)
        else:
            self.pool.add(candidate_id)

    def admit(self, *, contested: bool) -> None:
        candidate_id = self.pool.take(self.rng, leave=contested)
        if candidate_id is None:
            return self.capture()
        key = unique_key(f"mp{self.index}-admit")
        arguments = {"candidate_id": candidate_id, "idempotency_key": key}
        envelope, server = self.send(ADMIT, arguments, self.server())
        self.pool.discard(candidate_id)
        if not envelope["ok"]:
            assert self.pool.shared and envelope["error"]["code"] in LOST_RACE, envelope
            self.tally.lost_admissions += 1
            return None
        self._admitted(key, arguments, ok_value(envelope), server)
        return None

    def _admitted(self, key: str, arguments: dict[str, Any], value: dict[str, Any], server: int) -> None:
        outcome = value["outcome"]
        assert outcome["status"] == "accepted", outcome
        self.record(key, journal.CANDIDATE_ACCEPTED, outcome["candidate_id"], outcome["cursor"])
        self.accepted[outcome["record_id"]] = outcome["candidate_id"]
        self.current_records.append(outcome["record_id"])
        self.replayable.append((ADMIT, arguments, value, server))

    def _gated(self, tool: str, arguments: dict[str, Any], target: str) -> dict[str, Any]:
        first, server = self.send(tool, arguments, self.server())
        assert not first["ok"] and first["error"]["code"] == "gate_failed", first
        with_cli = self.tally.cli_approvals < CLI_APPROVALS_PER_CLIENT
        self.tally.cli_approvals += with_cli
        self.approver.approve(target, self.principal, with_cli=with_cli)
        return ok_value(self.send(tool, arguments, self.server(avoid=server))[0])

    def withdraw(self) -> None:
        if not self.private_pending:
            return self.capture()
        candidate_id = self.private_pending.pop(self.rng.randrange(len(self.private_pending)))
        arguments = withdraw_args(candidate_id, key=unique_key(f"mp{self.index}-withdraw"))
        receipt = self._gated(WITHDRAW, arguments, candidate_id)["receipt"]
        assert receipt["to_state"] == "withdrawn", receipt
        self.record(arguments["idempotency_key"], journal.CANDIDATE_WITHDRAWN, candidate_id, receipt["cursor"])
        self.withdrawn.add(candidate_id)
        return None

    def forget(self) -> None:
        if not self.current_records:
            return self.admit(contested=False)
        record_id = self.current_records.pop(self.rng.randrange(len(self.current_records)))
        arguments = forget_args(record_id, key=unique_key(f"mp{self.index}-forget"))
        receipt = self._gated(FORGET, arguments, record_id)["receipt"]
        assert receipt["to_state"] == "tombstoned", receipt
        self.record(arguments["idempotency_key"], journal.RECORD_TRANSITIONED, record_id, receipt["cursor"])
        self.forgotten.add(record_id)
        return None

    def replay(self) -> None:
        """An acknowledged call repeated with its key on another process: the same answer, marked replayed."""
        if not self.replayable:
            return self.capture()
        tool, arguments, first, answered_by = self.rng.choice(self.replayable)
        self.tally.replays += 1
        again = ok_value(self.send(tool, arguments, self.server(avoid=answered_by))[0])
        if tool == CAPTURE:
            assert again == {**first, "status": "duplicate_exact"}, (first, again)
        else:
            assert again == {**first, "replayed": True}, (first, again)
        return None

    def race(self, racer: ThreadPoolExecutor) -> None:
        """One new capture sent to two processes at once: one commits, the other replays it."""
        key = unique_key(f"mp{self.index}-race")
        arguments = capture_args(f"Decision {key} of client {self.index}: raced to two servers.", key=key)
        one = self.server()
        futures = [racer.submit(self.send, CAPTURE, arguments, n) for n in (one, self.server(avoid=one))]
        answers = [future.result() for future in futures]
        values = [ok_value(envelope) for envelope, _ in answers]
        self.tally.races += 1
        assert sorted(value["status"] for value in values) == ["committed_pending", "duplicate_exact"], values
        assert values[0]["candidate_id"] == values[1]["candidate_id"], values
        assert values[0]["cursor"] == values[1]["cursor"], values
        fresh = next(n for n, value in enumerate(values) if value["status"] == "committed_pending")
        self._captured(key, arguments, values[fresh], answers[fresh][1])

    def run(self, calls: int) -> None:
        # However short the run, every client withdraws and forgets through the gate (an admission that
        # loses a race to another client of the scope leaves nothing to forget: then it tries again).
        self.capture(private=True)
        while not self.withdrawn:
            self.withdraw()
        while not self.forgotten:
            self.forget()
        with ThreadPoolExecutor(max_workers=2) as racer:
            actions: list[tuple[float, Callable[[], None]]] = [
                (0.30, self.capture),
                (0.22, lambda: self.admit(contested=False)),
                (0.10 if self.pool.shared else 0.0, lambda: self.admit(contested=True)),
                (0.08, self.withdraw),
                (0.08, self.forget),
                (0.12, self.replay),
                (0.10, lambda: self.race(racer)),
            ]
            weights = [weight for weight, _ in actions]
            while self.tally.calls < calls:
                self.rng.choices(actions, weights)[0][1]()


# -- the store afterwards --------------------------------------------------------------------------------


def check_store(engine: Engine, clients: list[Client]) -> None:
    by_scope: dict[Scope, list[Client]] = {}
    for client in clients:
        by_scope.setdefault(client.scope, []).append(client)
    for scope, members in by_scope.items():
        effects = [effect for client in members for effect in client.effects.values()]
        with engine.deps.store.read() as tx:
            events = list(tx.events(scope))
            candidates = {row.candidate_id: row.state for row in tx.candidate_states(scope)}
            records = tx.record_states(scope)
        # Dense cursors, and exactly the acknowledged mutations: each at its acknowledged cursor, nothing else.
        assert [event.cursor for event in events] == list(range(1, len(events) + 1)), scope
        assert len(effects) == len(events), (scope, len(effects), len(events))
        for effect in effects:
            event = events[effect.cursor - 1]
            named = event.body["data"].get(
                "record_id" if effect.kind == journal.RECORD_TRANSITIONED else "candidate_id"
            )
            assert (event.kind, named) == (effect.kind, effect.target), (effect, event.body)
        accepted_events = [event for event in events if event.kind == journal.CANDIDATE_ACCEPTED]
        accepted_candidates = Counter(event.body["data"]["candidate_id"] for event in accepted_events)
        assert all(count == 1 for count in accepted_candidates.values()), "a candidate was admitted twice"

        captured = set().union(*(client.captured for client in members))
        accepted = {rid: cid for client in members for rid, cid in client.accepted.items()}
        withdrawn = set().union(*(client.withdrawn for client in members))
        forgotten = set().union(*(client.forgotten for client in members))
        assert set(candidates) == captured, scope
        for candidate_id, state in candidates.items():
            expected = (
                "withdrawn"
                if candidate_id in withdrawn
                else "accepted_current"
                if candidate_id in accepted.values()
                else "pending"
            )
            assert state == expected, (candidate_id, state, expected)
        assert records == {rid: "tombstoned" if rid in forgotten else "accepted_current" for rid in accepted}, scope


@dataclass
class Fleet:
    servers: list[HttpServer]
    clients: list[Client]


@pytest.fixture
def fleet(paths: HostPaths, tmp_path: Path) -> Iterator[Fleet]:
    with ExitStack() as stack:
        servers = [
            stack.enter_context(HttpServer(paths.home, tmp_path / f"server-{n}.log", semantic=True))
            for n in range(SERVERS)
        ]
        engine = stack.enter_context(engine_for(paths))
        approver = Approver(engine, HostCli(paths))
        pools = {scope: ScopePool(CLIENT_SCOPES.count(scope)) for scope in CLIENT_SCOPES}
        clients = []
        for index, scope in enumerate(CLIENT_SCOPES):
            issued: Issued = bind(
                paths,
                tenant=scope.tenant,
                workspace=scope.workspace,
                principal=f"client-{index}",
                agent_id=f"agent-{index}",
                session=f"session-{index}",
            )
            era = "legacy" if index % 2 else "auto"  # both protocol eras at once
            agents = [stack.enter_context(HttpAgent(server.url, issued.token, mode=era)) for server in servers]
            clients.append(Client(index, scope, agents, pools[scope], approver, random.Random(index)))
        yield Fleet(servers, clients)
        for server in servers:
            assert "Traceback" not in server.stderr(), server.stderr()


@pytest.mark.parametrize(
    "calls",
    [
        pytest.param(CALLS_PER_CLIENT, id="short"),
        pytest.param(CALLS_PER_CLIENT_SLOW, id="full", marks=pytest.mark.slow),
    ],
)
def test_three_processes_eight_clients_every_mutation_exactly_once(fleet: Fleet, paths: HostPaths, calls: int) -> None:
    failures: list[BaseException] = []

    def drive(client: Client) -> None:
        try:
            client.run(calls)
        except BaseException as exc:  # re-raised below, on the test's own thread
            failures.append(exc)

    started = time.monotonic()
    threads = [
        threading.Thread(target=drive, args=(client,), name=f"client-{c}") for c, client in enumerate(fleet.clients)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=HANG_S)
    elapsed = time.monotonic() - started
    if failures:
        raise failures[0]
    assert not any(thread.is_alive() for thread in threads), "a client hung"

    tallies = [client.tally for client in fleet.clients]
    assert sum(t.calls for t in tallies) >= len(CLIENT_SCOPES) * calls
    assert sum(t.replays for t in tallies) > 0 and sum(t.races for t in tallies) > 0
    assert all(client.withdrawn and client.forgotten for client in fleet.clients)

    for server in fleet.servers:
        assert server.stop() == 0
    verified = HostCli(paths).run("verify", check=False)
    assert verified.returncode == 0, verified.stderr
    with engine_for(paths) as engine:
        check_store(engine, fleet.clients)
    store = "PostgreSQL" if store_settings(paths).is_postgres else "SQLite"
    report(
        f"mutations from 8 clients through {SERVERS} servers on one store ({store})",
        sum(t.calls for t in tallies),
        target="each exactly once, no cursor gap",
        unit=f"({elapsed:.0f} s)",
    )
    report(
        f"same key raced to two servers, and retried on another ({store})",
        sum(t.races for t in tallies) + sum(t.replays for t in tallies),
        target="one winner, one effect",
    )
