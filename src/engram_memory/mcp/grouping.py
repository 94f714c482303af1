"""Group commit at the edge: writes that arrive while the engine is busy share its next commit.

Without it, every capture and admission pays its own store and vault commits however many agents
call at once, and the server tops out near one write pair per two commits. With it, calls that
queue up behind a running one go to the engine together (`Engine.handle_group`), each still answered
as if alone, none before the shared commit is durable. A call that finds the engine idle runs at once,
alone: grouping never makes a lone agent wait.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import anyio

from engram_memory.contract.errors import ProtocolFault
from engram_memory.engine.engine import AgentCall, AnswersCalls

# At most this many calls share one commit; the rest wait for the next.
GROUP_LIMIT = 64


@dataclass(slots=True)
class _Waiting:
    call: AgentCall
    done: anyio.Event = field(default_factory=anyio.Event)
    outcome: dict[str, Any] | ProtocolFault | None = None
    fault: BaseException | None = None


class CallGroups:
    """Lives on the event loop: only the loop's own tasks touch the queue, so it needs no lock."""

    def __init__(self, engine: AnswersCalls) -> None:
        self._engine = engine
        self._waiting: list[_Waiting] = []
        self._running = False

    async def answer(self, call: AgentCall) -> dict[str, Any]:
        """The call's envelope; raises the ProtocolFault `handle` would raise."""
        waiting = _Waiting(call)
        self._waiting.append(waiting)
        if not self._running:
            self._running = True
            try:
                # Shielded: the calls queued behind this one are answered even if its own caller leaves.
                with anyio.CancelScope(shield=True):
                    await self._drain()
            finally:
                self._running = False
        await waiting.done.wait()
        if waiting.fault is not None:
            raise waiting.fault
        if isinstance(waiting.outcome, ProtocolFault):
            raise waiting.outcome
        assert waiting.outcome is not None
        return waiting.outcome

    async def _drain(self) -> None:
        while self._waiting:
            group, self._waiting = self._waiting[:GROUP_LIMIT], self._waiting[GROUP_LIMIT:]
            try:
                outcomes = await anyio.to_thread.run_sync(self._engine.handle_group, [item.call for item in group])
            except BaseException as exc:  # handle_group answers every call; this is a fault of the server itself
                for item in (*group, *self._waiting):
                    item.fault = exc
                    item.done.set()
                self._waiting = []
                return
            for item, outcome in zip(group, outcomes, strict=True):
                item.outcome = outcome
                item.done.set()
