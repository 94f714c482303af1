"""Shared pieces of the conformance suite: a pool of servers, the host CLI, envelope checks.

Nothing is mocked: `ServedAgent` is the SDK client joined in process to the server `engram-memory serve`
builds, `StdioAgent` the same client over stdio to a real `serve` process, `HostCli` runs the real host
command line's entry point, and the store is read as the SQLite file (or database) it is.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import pytest
from mcp.shared.exceptions import MCPError

from engram_memory.contract.errors import MESSAGES, ErrorCode
from engram_memory.host.settings import HostPaths
from tests.host.clirun import cli
from tests.support.agents import McpAgent, ServedAgent, ServedHome, StdioAgent, refusal_message
from tests.support.homes import Issued, bind, engine_for, make_home
from tests.support.payloads import PURPOSE, capture_args, unique_key
from tests.support.raw import POSTGRES, raw_store, readable_in_store, store_kind

SEARCH = "engram_memory_search"
GET = "engram_memory_get"
CAPTURE = "engram_memory_capture"
ADMIT = "engram_memory_request_admission"
WITHDRAW = "engram_memory_withdraw"
FORGET = "engram_memory_forget"
ALL_TOOL_NAMES = (SEARCH, GET, CAPTURE, ADMIT, WITHDRAW, FORGET)

ERAS = ("legacy", "auto")
ERA_PROTOCOL = {"legacy": "2025-11-25", "auto": "2026-07-28"}

TRUSTED_CONTEXT_CODE = -32603
TRUSTED_CONTEXT_MESSAGE = "Trusted invocation context unavailable"
UNKNOWN_TOOL_CODE = -32602
UNKNOWN_TOOL_MESSAGE = "Unknown tool"

# SPEC §13, written out here on purpose (not imported), so a wrong table in the code fails a test.
SPEC_RETRIABLE = frozenset(
    {
        "MUTATION_OUTCOME_UNKNOWN",
        "RATE_LIMITED",
        "DEADLINE_EXCEEDED",
        "CANCELLED",
        "STORE_UNAVAILABLE",
        "FENCE_LOST",
        "CURSOR_GAP",
        "POLICY_UNAVAILABLE",
        "POLICY_STALE",
        "PROJECTION_STALE",
        "RANKING_UNAVAILABLE",
    }
)

SUCCESS_KEYS = {"ok", "output", "auditId", "redactionClass"}
FAILURE_KEYS = {"ok", "auditId", "redactionClass", "error"}
DIGEST_RE = re.compile(r"^sha256:[0-9a-f]{64}$")
RECORD_ID_RE = re.compile(r"^mem_[a-z2-7]+$")
BASE32 = "abcdefghijklmnopqrstuvwxyz234567"

# Named bindings a test can ask the pool for; all live in one home unless said otherwise.
BINDINGS: dict[str, dict[str, Any]] = {
    "alice": {},
    "alice_confirm": {"confirm_mutations": True, "session": "session-confirm"},
    "alice_search_only": {"grants": frozenset({SEARCH})},
    "alice_other_purpose": {"purpose_ref": "purpose:conformance-descriptions"},
    "bob": {"principal": "bob", "agent_id": "agent-2", "session": "session-2"},
    "tenant_b": {"tenant": "tenant-b"},
    "workspace_2": {"workspace": "workspace-2"},
    "searcher": {"workspace": "workspace-search"},
    # Its own scope for records that lapse: the server's housekeeping expires them whenever its timer
    # fires, which moves their scope's state, and must never go stale a page cursor of another test.
    "lapser": {"workspace": "workspace-lapse"},
}


# -- envelopes ------------------------------------------------------------------------------------


def ok_value(envelope: dict[str, Any]) -> dict[str, Any]:
    """The value of a success envelope, after checking its exact SPEC §3 shape."""
    assert envelope.get("ok") is True, envelope
    assert set(envelope) == SUCCESS_KEYS, envelope
    assert envelope["redactionClass"] == "high"
    assert isinstance(envelope["auditId"], str) and envelope["auditId"]
    assert set(envelope["output"]) == {"schema_version", "value"}
    assert envelope["output"]["schema_version"] == 1
    value = envelope["output"]["value"]
    assert isinstance(value, dict)
    return value


# Codes whose message goes on to name where the arguments broke which rule; the extra members of gate_failed.
TEACHING_CODES = frozenset({"INVALID_SCHEMA", "INVALID_DIGEST"})
GATE_FIELDS = {"confirmation_request_id", "for_the_person"}


def assert_failure(envelope: dict[str, Any], code: str) -> None:
    """An exact SPEC §3 failure envelope for `code`, with its constant message and SPEC §13 retriable flag."""
    assert envelope.get("ok") is False, envelope
    assert envelope["error"]["code"] == code, envelope
    assert set(envelope) == FAILURE_KEYS, envelope
    assert envelope["redactionClass"] == "high"
    assert isinstance(envelope["auditId"], str) and envelope["auditId"]
    extra = GATE_FIELDS if code == ErrorCode.GATE_FAILED.value else set()
    assert set(envelope["error"]) == {"code", "message", "retriable", *extra}
    message = envelope["error"]["message"]
    assert message == MESSAGES[ErrorCode(code)] or (
        code in TEACHING_CODES and message.startswith(MESSAGES[ErrorCode(code)] + " At ")
    )
    assert envelope["error"]["retriable"] is (code in SPEC_RETRIABLE)


def without_audit(envelope: dict[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in envelope.items() if name != "auditId"}


def protocol_error(agent: McpAgent, tool: str, arguments: dict[str, Any] | None) -> MCPError:
    with pytest.raises(MCPError) as caught:
        agent.raw_call(tool, arguments)
    return caught.value


def assert_trusted_context_unavailable(agent: McpAgent, tool: str, arguments: dict[str, Any] | None) -> None:
    error = protocol_error(agent, tool, arguments)
    assert (error.error.code, error.error.message) == (TRUSTED_CONTEXT_CODE, TRUSTED_CONTEXT_MESSAGE)


def assert_unknown_tool(agent: McpAgent, tool: str, arguments: dict[str, Any] | None) -> None:
    error = protocol_error(agent, tool, arguments)
    assert (error.error.code, error.error.message) == (UNKNOWN_TOOL_CODE, UNKNOWN_TOOL_MESSAGE)


# -- content --------------------------------------------------------------------------------------


def unique_word(prefix: str = "w") -> str:
    """A word no other test uses: lowercase letters and hex digits only (never secret-shaped)."""
    return prefix + secrets.token_hex(6)


def shaped_like(known_id: str) -> str:
    """An id nobody issued with the same prefix, alphabet and length as `known_id`."""
    prefix, _, body = known_id.partition("_")
    while True:
        candidate = prefix + "_" + "".join(secrets.choice(BASE32) for _ in body)
        if candidate != known_id:
            return candidate


def key16() -> str:
    """An idempotency key of exactly 16 ASCII bytes, unique in this session."""
    return "k16-" + secrets.token_hex(6)


def capture(agent: McpAgent, text: str, **knobs: Any) -> dict[str, Any]:
    value = ok_value(agent.call(CAPTURE, capture_args(text, **knobs)))
    assert value["status"] == "committed_pending", value
    return value


def admit(agent: McpAgent, candidate_id: str, key: str | None = None) -> dict[str, Any]:
    return ok_value(agent.call(ADMIT, {"candidate_id": candidate_id, "idempotency_key": key or unique_key("admit")}))


def remember(agent: McpAgent, text: str, **knobs: Any) -> tuple[str, str]:
    """Capture and admit `text`; returns (candidate_id, record_id) of the accepted record."""
    captured = capture(agent, text, **knobs)
    outcome = admit(agent, captured["candidate_id"])["outcome"]
    assert outcome["status"] == "accepted", outcome
    return captured["candidate_id"], outcome["record_id"]


def search(agent: McpAgent, query: str, purpose: str = PURPOSE, **params: Any) -> dict[str, Any]:
    return agent.call(SEARCH, {"query": query, "purpose_ref": purpose, **params})


def get(agent: McpAgent, record_id: str, purpose: str = PURPOSE, **params: Any) -> dict[str, Any]:
    return agent.call(GET, {"record_id": record_id, "purpose_ref": purpose, **params})


def found_ids(agent: McpAgent, query: str) -> list[str]:
    return [packet["record"]["record_id"] for packet in ok_value(search(agent, query))["records"]]


def withdraw_args(candidate_id: str, key: str | None = None, reason: str = "reason:ticket-1") -> dict[str, Any]:
    return {"candidate_id": candidate_id, "idempotency_key": key or unique_key("withdraw"), "reason_ref": reason}


def forget_args(record_id: str, key: str | None = None, reason: str = "reason:ticket-2") -> dict[str, Any]:
    return {"record_id": record_id, "idempotency_key": key or unique_key("forget"), "reason_ref": reason}


# -- the store, as files --------------------------------------------------------------------------


def db_query(paths: HostPaths, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Rows from the home's store (SQLite file or PostgreSQL database), read by a separate connection as
    any host tool would; `?` placeholders on both."""
    with raw_store(paths) as db:
        return db.rows(sql, params)


def db_count(paths: HostPaths, table: str, where: str = "", params: tuple[Any, ...] = ()) -> int:
    sql = f"SELECT COUNT(*) FROM {table}" + (f" WHERE {where}" if where else "")
    return int(db_query(paths, sql, params)[0][0])


def store_files(paths: HostPaths) -> dict[Path, bytes]:
    """Every file under the home's store folder, as raw bytes."""
    return {path: path.read_bytes() for path in sorted(paths.store_dir.rglob("*")) if path.is_file()}


def files_containing(paths: HostPaths, needles: list[bytes]) -> list[str]:
    """Where the store at rest holds any of `needles` (case-insensitive), as 'place: needle' strings.

    SQLite: every byte of every file in the store folder (it must not be empty). PostgreSQL: every row of
    every table, as text (tests/support/raw.py).
    """
    if store_kind(paths) == POSTGRES:
        return readable_in_store(paths, [needle.decode() for needle in needles])
    assert store_files(paths), "the store folder is empty"
    hits = []
    for path, data in store_files(paths).items():
        lowered = data.lower()
        hits.extend(f"{path.name}: {needle!r}" for needle in needles if needle.lower() in lowered)
    return hits


# -- the host -------------------------------------------------------------------------------------


class HostCli:
    """The real `engram-memory` host command line against one home, run as `tests.host.clirun.cli` runs it
    (its entry point in this process, as a subprocess would be given it)."""

    def __init__(self, paths: HostPaths) -> None:
        self.paths = paths

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        command = [*args, "--home", str(self.paths.home)]
        ran = cli(*command, timeout=120)
        done = subprocess.CompletedProcess(command, ran.code, ran.stdout, ran.stderr)
        if check:
            assert done.returncode == 0, (args, done.returncode, done.stderr)
        return done

    def confirmations(self, *, include_all: bool = False, target: str | None = None) -> list[dict[str, Any]]:
        args = ["confirmations", "list", "--json"] + (["--all"] if include_all else [])
        items: list[dict[str, Any]] = json.loads(self.run(*args).stdout)
        return [item for item in items if target is None or item["target"] == target]

    def only_request(self, target: str) -> dict[str, Any]:
        items = self.confirmations(target=target)
        assert len(items) == 1, items
        return items[0]

    def approve(self, confirmation_id: str, ttl_s: int | None = None) -> dict[str, Any]:
        ttl = [] if ttl_s is None else ["--ttl", str(ttl_s)]
        decided: dict[str, Any] = json.loads(
            self.run("confirmations", "approve", confirmation_id, *ttl, "--json").stdout
        )
        return decided

    def deny(self, confirmation_id: str) -> dict[str, Any]:
        decided: dict[str, Any] = json.loads(self.run("confirmations", "deny", confirmation_id, "--json").stdout)
        return decided


def approve_in_process(paths: HostPaths, target: str, ttl_ms: int = 60_000) -> str:
    """Approves the one open request for `target` through the in-process host engine (fast path)."""
    with engine_for(paths) as engine:
        requests = [row for row, _ in engine.confirmations() if row.target == target]
        assert len(requests) == 1, requests
        engine.approve_confirmation(requests[0].confirmation_id, decided_by="host:conformance", ttl_ms=ttl_ms)
    return requests[0].confirmation_id


def confirmation_rows(paths: HostPaths, targets: set[str]) -> list[Any]:
    """Every confirmation row (any status) whose target is one of `targets`."""
    with engine_for(paths) as engine:
        return [row for row, _ in engine.confirmations(include_decided=True) if row.target in targets]


def forget_now(agent: McpAgent, paths: HostPaths, record_id: str) -> dict[str, Any]:
    """Forget with the human gate passed: first call gate_failed, host approves, identical retry executes."""
    arguments = forget_args(record_id)
    assert_failure(agent.call(FORGET, arguments), "gate_failed")
    approve_in_process(paths, record_id)
    return ok_value(agent.call(FORGET, arguments))


def withdraw_now(agent: McpAgent, paths: HostPaths, candidate_id: str) -> dict[str, Any]:
    arguments = withdraw_args(candidate_id)
    assert_failure(agent.call(WITHDRAW, arguments), "gate_failed")
    approve_in_process(paths, candidate_id)
    return ok_value(agent.call(WITHDRAW, arguments))


# -- policy edits ---------------------------------------------------------------------------------


def write_policy(paths: HostPaths, text: str) -> None:
    """Writes policy.toml and gives it a fresh modification time, so the server sees the change."""
    paths.policy.write_text(text, encoding="utf-8")
    stamp = time.time_ns() + 1_000_000_000
    os.utime(paths.policy, ns=(stamp, stamp))


@contextmanager
def policy_edited(paths: HostPaths, text: str) -> Iterator[None]:
    original = paths.policy.read_text(encoding="utf-8")
    write_policy(paths, text)
    try:
        yield
    finally:
        write_policy(paths, original)


def policy_with(paths: HostPaths, **settings: str) -> str:
    """The home's policy text with top-level `name = value` lines replaced (values are TOML literals)."""
    text = paths.policy.read_text(encoding="utf-8")
    for name, literal in settings.items():
        text, count = re.subn(rf"(?m)^{name} = .*$", f"{name} = {literal}", text)
        assert count == 1, name
    return text


# -- a pool of running servers --------------------------------------------------------------------


class Pool:
    """Servers built once per (binding, era) and shared; closed together at the end of the scope.

    `agent` joins the SDK's client to the server `serve` builds, in this process (the contract's
    behaviour, whatever the transport); `stdio_agent` and `refusal` start the real `serve` process, for
    what only the stdio transport shows (the handshake's refusal of a binding that cannot be used)."""

    def __init__(self, paths: HostPaths, scratch: Path) -> None:
        self.paths = paths
        self.host = HostCli(paths)
        self._scratch = scratch
        self._issued: dict[str, Issued] = {}
        self._served: ServedHome | None = None
        self._agents: dict[tuple[str, str], ServedAgent] = {}
        self._stdio: dict[tuple[str, str], StdioAgent] = {}

    def issued(self, name: str) -> Issued:
        if name not in self._issued:
            self._issued[name] = self._issue(name)
        return self._issued[name]

    def _issue(self, name: str) -> Issued:
        if name == "expired":
            # Signed by this home, but its hour is long past.
            return bind(self.paths, now_s=int(time.time()) - 7200, lifetime_s=60)
        if name == "forged":
            # Well-formed and signed, but by another host's key.
            forger = make_home(self._scratch / "forger-home")
            return bind(forger)
        return bind(self.paths, **BINDINGS[name])

    def _token(self, name: str) -> str | None:
        return None if name == "none" else self.issued(name).token

    def agent(self, name: str, era: str = "auto") -> ServedAgent:
        if (name, era) not in self._agents:
            if self._served is None:
                self._served = ServedHome(self.paths)
            self._agents[name, era] = ServedAgent(self._served, self._token(name), mode=era)
        return self._agents[name, era]

    def stdio_agent(self, name: str, era: str = "auto") -> StdioAgent:
        if (name, era) not in self._stdio:
            self._stdio[name, era] = StdioAgent(self.paths.home, self._token(name), mode=era)
        return self._stdio[name, era]

    def refusal(self, name: str, era: str) -> str:
        """The message of the -32603 a server bound by `name` answers a client connecting in `era` with."""
        return refusal_message(lambda: StdioAgent(self.paths.home, self._token(name), mode=era))

    def close(self) -> None:
        for agent in [*self._agents.values(), *self._stdio.values()]:
            with suppress(Exception):
                agent.close()
        self._agents.clear()
        self._stdio.clear()
        if self._served is not None:
            self._served.close()
            self._served = None


def sample_args(tool: str, purpose: str = PURPOSE) -> dict[str, Any]:
    """Arguments that satisfy `tool`'s schema (targets are well-shaped ids nobody issued)."""
    record_id = "mem_" + "".join(secrets.choice(BASE32) for _ in range(26))
    candidate_id = "cand_" + "".join(secrets.choice(BASE32) for _ in range(26))
    return {
        SEARCH: lambda: {"query": "sample query words", "purpose_ref": purpose},
        GET: lambda: {"record_id": record_id, "purpose_ref": purpose},
        CAPTURE: lambda: capture_args(f"Sample decision {unique_word()} for the context checks.", purpose=purpose),
        ADMIT: lambda: {"candidate_id": candidate_id, "idempotency_key": unique_key("admit")},
        WITHDRAW: lambda: withdraw_args(candidate_id),
        FORGET: lambda: forget_args(record_id),
    }[tool]()
