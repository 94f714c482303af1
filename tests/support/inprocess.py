"""An agent calling the engine in-process: the same `Engine.handle` the MCP server calls, minus the transport."""

from __future__ import annotations

from typing import Any

from engram_memory.contract.binding import Binding
from engram_memory.engine.engine import Engine
from tests.support.payloads import PURPOSE, capture_args, unique_key


class InProcessAgent:
    def __init__(self, engine: Engine, binding: Binding) -> None:
        self.engine = engine
        self.binding = binding

    def call(self, tool: str, arguments: Any) -> dict[str, Any]:
        return self.engine.handle(self.binding, tool, arguments)

    def value(self, tool: str, arguments: Any) -> dict[str, Any]:
        envelope = self.call(tool, arguments)
        assert envelope["ok"], envelope
        value: dict[str, Any] = envelope["output"]["value"]
        return value

    def error_code(self, tool: str, arguments: Any) -> str:
        envelope = self.call(tool, arguments)
        assert not envelope["ok"], envelope
        code: str = envelope["error"]["code"]
        return code

    # -- the common flows --------------------------------------------------------------------
    def capture(self, text: str, **options: Any) -> dict[str, Any]:
        return self.value("engram_memory_capture", capture_args(text, **options))

    def admit(self, candidate_id: str, key: str | None = None) -> dict[str, Any]:
        args = {"candidate_id": candidate_id, "idempotency_key": key or unique_key("admit")}
        outcome: dict[str, Any] = self.value("engram_memory_request_admission", args)["outcome"]
        if self.engine.deps.indexer is not None:
            self.engine.deps.indexer.settle()  # tests read the store next; a search settles by itself
        return outcome

    def remember(self, text: str, **options: Any) -> str:
        """Capture and admit; the record id."""
        outcome = self.admit(self.capture(text, **options)["candidate_id"])
        assert outcome["status"] == "accepted", outcome
        return str(outcome["record_id"])

    def remember_many(self, texts: list[str], *, batch: int = 250) -> list[str]:
        """Capture and admit each text through the host's import path (`Engine.import_memories`: the
        same two calls per text, audit rows included, a commit per batch); the record ids, in order.
        For tests that only need a filled store; a test of the agent path calls `remember`."""
        ids: list[str] = []
        for start in range(0, len(texts), batch):
            items = [(capture_args(text), unique_key("admit")) for text in texts[start : start + batch]]
            for outcome in self.engine.import_memories(self.binding, items):
                assert outcome.captured["ok"] and outcome.admitted is not None, outcome
                assert outcome.admitted["ok"], outcome.admitted
                admitted = outcome.admitted["output"]["value"]["outcome"]
                assert admitted["status"] == "accepted", admitted
                ids.append(str(admitted["record_id"]))
        if self.engine.deps.indexer is not None:
            self.engine.deps.indexer.settle()
        return ids

    def search(self, query: str, **options: Any) -> dict[str, Any]:
        return self.value("engram_memory_search", {"query": query, "purpose_ref": PURPOSE, **options})

    def found_ids(self, query: str, **options: Any) -> list[str]:
        return [packet["record"]["record_id"] for packet in self.search(query, **options)["records"]]

    def get(self, record_id: str) -> dict[str, Any]:
        return self.call("engram_memory_get", {"record_id": record_id, "purpose_ref": PURPOSE})
