"""Sign-in over HTTPS on loopback (certificates from trustme): the official SDK's OAuth client completes
authorization code + PKCE once as a client known by its metadata document, served over HTTPS by the test,
and once through registration; each then calls a tool, and its token's binding is what the rules mapped."""

from __future__ import annotations

import http.server
import json
import ssl
import threading
from collections.abc import Iterator

import anyio
import httpx
import pytest
import trustme

from engram_memory.host.settings import HostPaths
from tests.host.clirun import cli
from tests.support.http_agents import HttpServer
from tests.support.sign_in import CALLBACK, Memory, agent_session, free_port, signed_in_binding


@pytest.fixture(scope="module")
def authority() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
def document(authority: trustme.CA) -> Iterator[str]:
    """A client's metadata document, served over HTTPS by a certificate the test's authority issued."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    url = f"https://127.0.0.1:{server.server_address[1]}/oauth/client.json"
    body = json.dumps(
        {
            "client_id": url,
            "client_name": "Document agent",
            "redirect_uris": [CALLBACK],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
        }
    ).encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            found = self.path == "/oauth/client.json"
            self.send_response(200 if found else 404)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body) if found else 0))
            self.end_headers()
            if found:
                self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            return

    server.RequestHandlerClass = Handler
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert("127.0.0.1").configure_cert(context)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield url
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def site(
    home: HostPaths, tmp_path_factory: pytest.TempPathFactory, authority: trustme.CA
) -> Iterator[tuple[HostPaths, HttpServer]]:
    """The module's home served over HTTPS (this module's own server: it needs the certificate)."""
    folder = tmp_path_factory.mktemp("oauth-tls")
    certificate = authority.issue_cert("127.0.0.1", "localhost")
    cert_file, key_file, ca_file = folder / "cert.pem", folder / "key.pem", folder / "ca.pem"
    certificate.cert_chain_pems[0].write_to_path(str(cert_file))
    certificate.private_key_pem.write_to_path(str(key_file))
    authority.cert_pem.write_to_path(str(ca_file))
    port = free_port()
    args = ("--port", str(port), "--public-url", f"https://127.0.0.1:{port}")
    tls = ("--tls-cert", str(cert_file), "--tls-key", str(key_file))
    env = {"SSL_CERT_FILE": str(ca_file)}  # the server fetches client documents signed by the same authority
    with HttpServer(home.home, folder / "serve.log", *args, *tls, env=env) as server:
        assert server.url.startswith("https://")
        yield home, server


def _trusting(authority: trustme.CA) -> ssl.SSLContext:
    context = ssl.create_default_context()
    authority.configure_trust(context)
    return context


def test_a_client_known_by_its_metadata_document_signs_in_over_https(
    site: tuple[HostPaths, HttpServer], document: str, authority: trustme.CA
) -> None:
    paths, server = site
    storage = Memory()
    session = anyio.run(
        lambda: agent_session(
            server, "alice@acme.com", storage, verify=_trusting(authority), client_metadata_url=document
        )
    )
    search = session["search"]
    assert isinstance(search, dict) and search["ok"] is True
    binding = signed_in_binding(paths, document)  # no registration: the document's URL is the client id
    assert (binding["tenant"], binding["workspace"], binding["principal"]) == ("acme", "team", "alice@acme.com")
    assert storage.client is not None and str(storage.client.client_id) == document
    # Turned away by the host, the document's client cannot come back, whatever its document says.
    assert cli("access", "revoke-client", document, "--home", paths.home).code == 0
    query = {"response_type": "code", "client_id": document, "redirect_uri": CALLBACK, "code_challenge": "x" * 43}
    again = httpx.get(f"{server.url.removesuffix('/mcp')}/authorize", params=query, verify=_trusting(authority))
    assert again.status_code == 400 and "not found" in again.text


def test_a_registered_client_signs_in_over_https(site: tuple[HostPaths, HttpServer], authority: trustme.CA) -> None:
    paths, server = site
    storage = Memory()
    session = anyio.run(lambda: agent_session(server, "alice@acme.com", storage, verify=_trusting(authority)))
    assert session["tools"] == [
        "engram_memory_capture",
        "engram_memory_get",
        "engram_memory_request_admission",
        "engram_memory_search",
    ]
    assert storage.client is not None
    binding = signed_in_binding(paths, str(storage.client.client_id))
    assert binding["workspace"] == "team"
