"""How a client is named to people (consent page, `access grants`), kept apart from the authorization server
so that the command line need not load it."""

from __future__ import annotations

import json


def client_name(metadata: str, client_id: str) -> str:
    """What the consent page calls the client: its registered name, else its id."""
    try:
        name = json.loads(metadata).get("client_name")
    except (ValueError, AttributeError):
        name = None
    return name if isinstance(name, str) and name.strip() else client_id
