"""Ending a grant, or every grant of a client: one way for the command line, the console and the sign-in
server alike. Kept free of the authorization server's imports so that the command line need not load it."""

from __future__ import annotations

from collections.abc import Callable

from engram_memory.engine.engine import Engine
from engram_memory.engine.ports.sign_in import SignInStore


def revoking_as(engine: Engine, person: str) -> Callable[[str], object]:
    """Revokes a binding by its token id in `person`'s name (what `end_grant` and `turn_away` call)."""
    return lambda token_id: engine.revoke_token(token_id, revoked_by=person)


def end_grant(
    store: SignInStore, revoke_token: Callable[[str], object], grant_id: str, reason: str, now_ms: int
) -> bool:
    """Revokes the grant (its refresh tokens stop working) and its live access tokens; False when it was
    revoked already (its tokens are revoked again all the same, which changes nothing)."""
    first = store.revoke_grant(grant_id, now_ms, reason)
    for token_id in store.live_bindings(grant_id, now_ms):
        revoke_token(token_id)
    return first


def turn_away(
    store: SignInStore, revoke_token: Callable[[str], object], client_id: str, reason: str, now_ms: int
) -> tuple[bool, int]:
    """Revokes the client and ends every grant it holds: (whether it was revoked just now, grants ended)."""
    first = store.revoke_client(client_id, now_ms)
    ended = 0
    for grant in store.grants():
        if grant.client_id == client_id and end_grant(store, revoke_token, grant.grant_id, reason, now_ms):
            ended += 1
    return first, ended
