"""Clients known by their metadata document: a client id that is an https URL serving the client's own
metadata (the MCP authorization spec's Client ID Metadata Documents), so no registration is needed.

The document is fetched without redirects, within a few seconds and a few kilobytes, from a public address
only (a loopback one too when this server itself is on loopback, for development); it must name itself as
the client id and list its redirect URIs. Such clients are public (PKCE, no secret). A fetched document is
kept for ten minutes in the process and in the vault, where the consent page reads the client's name.
"""

from __future__ import annotations

import ipaddress
import json
import socket
import time
from urllib.parse import urlsplit

import anyio
import httpx
from mcp.shared.auth import OAuthClientInformationFull
from pydantic import ValidationError

from engram_memory.contract.tools import ALL_TOOLS
from engram_memory.host.outbound import tls_context

MAX_DOCUMENT_BYTES = 16 * 1024
FETCH_TIMEOUT_S = 5.0
KEPT_S = 600.0


class DocumentRefused(Exception):
    """The document cannot stand for the client; the message is one line."""


def is_document_id(client_id: str) -> bool:
    parts = urlsplit(client_id)
    return parts.scheme == "https" and bool(parts.hostname) and parts.path not in ("", "/")


def _check_address(host: str, allow_loopback: bool) -> None:
    try:
        found = socket.getaddrinfo(host, 443, proto=socket.IPPROTO_TCP)
    except OSError as exc:
        raise DocumentRefused("the client's host does not resolve") from exc
    for *_, address in found:
        ip = ipaddress.ip_address(address[0])
        if ip.is_loopback and allow_loopback:
            continue
        if ip.is_private or ip.is_loopback or ip.is_link_local or ip.is_reserved or ip.is_multicast:
            raise DocumentRefused("the client's host is not a public address")


async def fetch_document(client_id: str, *, allow_loopback: bool) -> OAuthClientInformationFull:
    if not is_document_id(client_id):
        raise DocumentRefused("a client id metadata document is an https URL with a path")
    parts = urlsplit(client_id)
    if parts.username or parts.password or parts.fragment:
        raise DocumentRefused("a client id metadata document URL carries no credentials or fragment")
    await anyio.to_thread.run_sync(_check_address, parts.hostname or "", allow_loopback)
    body = b""
    try:
        async with (
            httpx.AsyncClient(timeout=FETCH_TIMEOUT_S, follow_redirects=False, verify=tls_context()) as client,
            client.stream("GET", client_id, headers={"accept": "application/json"}) as answer,
        ):
            if answer.status_code != 200:
                raise DocumentRefused(f"the client's metadata document answered HTTP {answer.status_code}")
            async for chunk in answer.aiter_bytes():
                body += chunk
                if len(body) > MAX_DOCUMENT_BYTES:
                    raise DocumentRefused("the client's metadata document is too large")
    except httpx.HTTPError as exc:
        raise DocumentRefused("the client's metadata document could not be fetched") from exc
    return _client_of(client_id, body)


def _client_of(client_id: str, body: bytes) -> OAuthClientInformationFull:
    try:
        document = json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise DocumentRefused("the client's metadata document is not JSON") from exc
    if not isinstance(document, dict) or document.get("client_id") != client_id:
        raise DocumentRefused("the client's metadata document does not name itself as the client id")
    if document.get("token_endpoint_auth_method", "none") != "none" or "client_secret" in document:
        raise DocumentRefused("a client known by its metadata document is a public client (no secret)")
    redirects = document.get("redirect_uris")
    if not isinstance(redirects, list) or not redirects:
        raise DocumentRefused("the client's metadata document lists no redirect URIs")
    # A document names the client, not this server's scopes: one that names none may ask for any tool (the
    # access rules bound what it gets).
    scope = document.get("scope") or " ".join(tool.value for tool in ALL_TOOLS)
    try:
        return OAuthClientInformationFull.model_validate(
            {**document, "token_endpoint_auth_method": "none", "scope": scope}
        )
    except ValidationError as exc:
        raise DocumentRefused("the client's metadata document is not valid client metadata") from exc


class DocumentCache:
    """Documents fetched in the last KEPT_S seconds, by client id (one process's memory)."""

    def __init__(self) -> None:
        self._kept: dict[str, tuple[float, OAuthClientInformationFull]] = {}

    def get(self, client_id: str) -> OAuthClientInformationFull | None:
        found = self._kept.get(client_id)
        if found is None or time.monotonic() - found[0] > KEPT_S:
            return None
        return found[1]

    def put(self, client: OAuthClientInformationFull) -> None:
        if len(self._kept) > 1024:
            self._kept.clear()
        self._kept[str(client.client_id)] = (time.monotonic(), client)
