"""How a client is named to people (consent page, `access grants`), kept apart from the authorization server
so that the command line need not load it."""

from __future__ import annotations

import json
from urllib.parse import urlsplit

from engram_memory.engine.ports.sign_in import ClientRow
from engram_memory.host.outbound import https_or_loopback


def client_name(metadata: str, client_id: str) -> str:
    """What the consent page calls the client: its registered name, else its id."""
    try:
        name = json.loads(metadata).get("client_name")
    except (ValueError, AttributeError):
        name = None
    return name if isinstance(name, str) and name.strip() else client_id


class ClientRefused(ValueError):
    """The client cannot be registered as given; the message says which value and why."""


def host_registered_client(
    name: str, redirect_uris: list[str], *, client_id: str, now_ms: int, scopes: list[str]
) -> ClientRow:
    """A public client the host registers for a person (for a client whose metadata document this server
    cannot read), as RFC 7591 registration would: PKCE, no secret, redirects only to the URIs given."""
    if not name.strip():
        raise ClientRefused("a client needs a name: the consent page shows it")
    if not redirect_uris:
        raise ClientRefused("name at least one --redirect-uri")
    for uri in redirect_uris:
        parts = urlsplit(uri)
        if not https_or_loopback(uri) or not parts.hostname or parts.fragment:
            raise ClientRefused(f"redirect URI {uri!r} is neither https nor http on loopback, or has a fragment")
    metadata = {
        "client_id": client_id,
        "client_id_issued_at": now_ms // 1000,
        "client_name": name.strip(),
        "redirect_uris": redirect_uris,
        "token_endpoint_auth_method": "none",
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "scope": " ".join(scopes),
    }
    return ClientRow(client_id, json.dumps(metadata), None, "registered", now_ms)
