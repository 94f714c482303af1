"""A client metadata document stands for a client only when it is what the client id says it is: fetched
from a public https address (loopback only for a loopback server), naming itself, listing its redirect
URIs, asking for no secret."""

from __future__ import annotations

import json

import pytest

from engram_memory.host.oauth.client_documents import (
    DocumentRefused,
    _check_address,
    _client_of,
    fetch_document,
    is_document_id,
)

URL = "https://app.example/oauth/client.json"


def _doc(**changes: object) -> bytes:
    document: dict[str, object] = {"client_id": URL, "client_name": "App", "redirect_uris": ["http://127.0.0.1:1/cb"]}
    document.update(changes)
    return json.dumps(document).encode()


def test_a_document_naming_itself_is_a_public_client_that_may_ask_for_any_tool() -> None:
    client = _client_of(URL, _doc())
    assert str(client.client_id) == URL and client.token_endpoint_auth_method == "none"
    assert client.scope is not None and "engram_memory_search" in client.scope.split()
    assert _client_of(URL, _doc(scope="engram_memory_get")).scope == "engram_memory_get"


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (b"not json", "is not JSON"),
        (b"[]", "does not name itself"),
        (_doc(client_id="https://other.example/client.json"), "does not name itself"),
        (_doc(redirect_uris=[]), "lists no redirect URIs"),
        (_doc(redirect_uris="http://x/cb"), "lists no redirect URIs"),
        (_doc(token_endpoint_auth_method="client_secret_basic"), "public client"),
        (_doc(client_secret="s3cret"), "public client"),
        (_doc(redirect_uris=[7]), "not valid client metadata"),
    ],
)
def test_a_document_that_is_not_what_its_id_says_is_refused(body: bytes, words: str) -> None:
    with pytest.raises(DocumentRefused, match=words):
        _client_of(URL, body)


@pytest.mark.parametrize(
    ("client_id", "is_one"),
    [
        (URL, True),
        ("http://app.example/client.json", False),
        ("https://app.example", False),
        ("https://app.example/", False),
        ("0f1e2d3c-uuid", False),
    ],
)
def test_only_an_https_url_with_a_path_is_a_document_id(client_id: str, is_one: bool) -> None:
    assert is_document_id(client_id) is is_one


@pytest.mark.parametrize("host", ["127.0.0.1", "10.1.2.3", "192.168.0.7", "169.254.169.254", "::1"])
def test_no_document_is_fetched_from_a_private_address(host: str) -> None:
    with pytest.raises(DocumentRefused, match="not a public address"):
        _check_address(host, allow_loopback=False)


def test_a_loopback_server_may_fetch_from_loopback_but_never_from_a_private_network() -> None:
    _check_address("127.0.0.1", allow_loopback=True)
    with pytest.raises(DocumentRefused):
        _check_address("10.1.2.3", allow_loopback=True)


def test_a_url_with_credentials_is_refused_before_anything_is_fetched() -> None:
    import anyio

    with pytest.raises(DocumentRefused, match="no credentials"):
        anyio.run(lambda: fetch_document("https://user:pw@app.example/client.json", allow_loopback=False))
