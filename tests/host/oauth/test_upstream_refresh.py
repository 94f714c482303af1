"""Asking the team's provider again at a refresh, where it cannot be reached or its token cannot be read:
the grant stays when the provider is only unreachable (the person may try again), and ends when the
sealed token does not open or the provider is no longer this server's. The provider here is a closed port
on loopback (a real refused connection, not a mock); the sign-in tables are a real home's vault."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from mcp.server.auth.provider import TokenError
from mcp.shared.auth import OAuthClientInformationFull

from engram_memory.engine.ports.sign_in import ClientRow, GrantRow, RefreshRow, SignInStore
from engram_memory.host.access.people import digest
from engram_memory.host.access.rules import AccessRules, Identity, IdentityProvider
from engram_memory.host.compose import open_vault
from engram_memory.host.oauth.provider import HostAuthorizationProvider
from engram_memory.host.oauth.sealed_tokens import TokenSeal
from engram_memory.host.oauth.service import GrantRefused, SignInService, SignInSettings, identity_json
from engram_memory.host.oauth.upstream import ProviderEndpoints, Upstream, UpstreamError, UpstreamRefused
from tests.support.homes import make_home
from tests.support.sign_in import free_port

ISSUER = f"http://127.0.0.1:{free_port()}"  # nothing listens there
ERIN = Identity(issuer=ISSUER, subject="erin", email="erin@acme.com", email_verified=True, groups=frozenset({"eng"}))


def _provider(issuer: str = ISSUER) -> IdentityProvider:
    return IdentityProvider(name="Acme SSO", issuer=issuer, client_id="engram", client_secret_file="/dev/null")


def test_a_sealed_token_opens_only_for_its_person_and_key() -> None:
    key = os.urandom(32)
    sealed = TokenSeal(key).seal("provider-refresh-token", ISSUER, "erin")
    assert "provider-refresh-token" not in sealed
    assert TokenSeal(key).open(sealed, ISSUER, "erin") == "provider-refresh-token"
    assert TokenSeal(key).open(sealed, ISSUER, "frank") is None
    assert TokenSeal(key).open(sealed, "https://other.example", "erin") is None
    assert TokenSeal(os.urandom(32)).open(sealed, ISSUER, "erin") is None
    assert TokenSeal(key).open("not base64!", ISSUER, "erin") is None
    assert TokenSeal(key).open(sealed[:-8], ISSUER, "erin") is None


def test_an_unreachable_provider_is_an_error_not_a_refusal() -> None:
    upstream = Upstream(_provider(), Ed25519PrivateKey.generate(), "http://127.0.0.1:1/sign-in/callback")
    with pytest.raises(UpstreamError) as discovery:
        asyncio.run(upstream.refresh("token", ERIN))
    assert not isinstance(discovery.value, UpstreamRefused)
    # Known endpoints, the token endpoint down: still only unreachable.
    upstream._endpoints = ProviderEndpoints(ISSUER + "/auth", ISSUER + "/token", ISSUER + "/jwks", ISSUER + "/me")
    with pytest.raises(UpstreamError) as token:
        asyncio.run(upstream.refresh("token", ERIN))
    assert not isinstance(token.value, UpstreamRefused) and "cannot be reached" in str(token.value)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SignInStore]:
    vault = open_vault(make_home(tmp_path / "home"))
    try:
        yield vault.sign_in()
    finally:
        vault.close()


def _service(store: SignInStore, seal: TokenSeal, provider: IdentityProvider | None) -> SignInService:
    return SignInService(
        store,
        Ed25519PrivateKey.generate(),
        SignInSettings(issuer="http://127.0.0.1:9", resource="http://127.0.0.1:9/mcp"),
        lambda: AccessRules(rules=(), identity_provider=provider),
        lambda row: None,
        lambda token_id: None,
        lambda: 1_000,
        seal,
    )


def _grant(store: SignInStore, grant_id: str, upstream_token: str | None) -> GrantRow:
    row = GrantRow(
        grant_id=grant_id,
        client_id="client",
        principal="erin@acme.com",
        identity=identity_json(ERIN, None),
        workspace="team",
        scopes=("engram_memory_search",),
        resource="http://127.0.0.1:9/mcp",
        created_at_ms=0,
        expires_at_ms=10**12,
        upstream_token=upstream_token,
    )
    store.add_grant(row)
    return row


def test_the_grant_survives_an_unreachable_provider_and_ends_when_its_token_cannot_be_read(
    store: SignInStore,
) -> None:
    seal = TokenSeal(os.urandom(32))
    service = _service(store, seal, _provider())
    kept = _grant(store, "grant_kept", seal.seal("provider-refresh-token", ISSUER, "erin"))
    assert store.grant("grant_kept") == kept
    with pytest.raises(GrantRefused, match="cannot be reached: try again later"):
        asyncio.run(service.asked_upstream(kept))
    assert store.grant("grant_kept").revoked_at_ms is None  # type: ignore[union-attr]

    unreadable = _grant(store, "grant_unreadable", TokenSeal(os.urandom(32)).seal("t", ISSUER, "erin"))
    with pytest.raises(GrantRefused, match="cannot be checked again"):
        asyncio.run(service.asked_upstream(unreadable))
    assert store.grant("grant_unreadable").revoked_at_ms is not None  # type: ignore[union-attr]

    elsewhere = _service(store, seal, _provider("https://sso.other.example"))
    moved = _grant(store, "grant_moved", seal.seal("provider-refresh-token", ISSUER, "erin"))
    with pytest.raises(GrantRefused, match="no longer signs people in through"):
        asyncio.run(elsewhere.asked_upstream(moved))
    assert store.grant("grant_moved").revoked_at_ms is not None  # type: ignore[union-attr]


def test_a_grant_without_a_provider_token_is_not_asked_about(store: SignInStore) -> None:
    service = _service(store, TokenSeal(os.urandom(32)), None)
    assert asyncio.run(service.asked_upstream(_grant(store, "grant_local", None))) is None


def test_a_refresh_the_provider_could_not_answer_leaves_the_refresh_token_usable(store: SignInStore) -> None:
    seal = TokenSeal(os.urandom(32))
    service = _service(store, seal, _provider())
    store.put_client(ClientRow("client", '{"client_id": "client"}', None, "registered", 0))
    _grant(store, "grant_waiting", seal.seal("provider-refresh-token", ISSUER, "erin"))
    store.add_refresh(RefreshRow(digest("our-refresh-token"), "grant_waiting", 0, 10**12))
    provider = HostAuthorizationProvider(service)
    client = OAuthClientInformationFull.model_validate(
        {"client_id": "client", "redirect_uris": ["http://127.0.0.1:9/cb"]}
    )

    async def refresh() -> None:
        loaded = await provider.load_refresh_token(client, "our-refresh-token")
        assert loaded is not None
        await provider.exchange_refresh_token(client, loaded, [])

    for _ in range(2):  # the client may try again with the same token
        with pytest.raises(TokenError, match="try again later"):
            asyncio.run(refresh())
        row = store.refresh_token(digest("our-refresh-token"))
        assert row is not None and row.used_at_ms is None
    assert store.grant("grant_waiting").revoked_at_ms is None  # type: ignore[union-attr]
