"""One agent call as the engine sees it: the verified binding, its scope and actor, and the time.

Built once per call from the host's binding, never from arguments.
"""

from __future__ import annotations

from dataclasses import dataclass

from engram_memory.contract.binding import Binding
from engram_memory.engine.ports.store import Actor, Scope


@dataclass(frozen=True, slots=True)
class Call:
    binding: Binding
    now_ms: int

    @property
    def scope(self) -> Scope:
        return Scope(tenant=self.binding.tenant, workspace=self.binding.workspace)

    @property
    def actor(self) -> Actor:
        return Actor(principal=self.binding.principal, agent_id=self.binding.agent_id, session=self.binding.session)

    def actor_claims(self) -> dict[str, str]:
        return {
            "principal": self.binding.principal,
            "agent_id": self.binding.agent_id,
            "session": self.binding.session,
        }
