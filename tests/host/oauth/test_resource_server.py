"""Resource-server mode: `serve --http --public-url URL --trust-issuer ISSUER` accepts the team's own
authorization server's JWTs (keys from its JWKS, found through its metadata and fetched again for a new key
id), for this endpoint's audience, unexpired, and maps their claims with access.toml; anything else is 401.
The issuer is a small one the test runs on loopback."""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from engram_memory.host.access.rules_file import parse_access_rules
from engram_memory.host.oauth.resource_server import ExternalTokens, discover
from engram_memory.host.settings import HostPaths
from tests.support.http_agents import HttpServer
from tests.support.sign_in import RULES, free_port

LIST_TOOLS = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
MCP_HEADERS = {"accept": "application/json, text/event-stream", "mcp-protocol-version": "2025-11-25"}


class Issuer:
    """An authorization server's public face: metadata and a JWKS whose keys the test can rotate."""

    def __init__(self) -> None:
        self.keys: dict[str, ec.EllipticCurvePrivateKey] = {"k1": ec.generate_private_key(ec.SECP256R1())}
        issuer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path == "/.well-known/openid-configuration":
                    body = {"issuer": issuer.url, "jwks_uri": issuer.url + "/jwks"}
                elif self.path == "/jwks":
                    body = {"keys": [issuer.jwk(kid) for kid in issuer.keys]}
                else:
                    self.send_response(404)
                    self.end_headers()
                    return
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                return

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def jwk(self, kid: str) -> dict[str, Any]:
        public: dict[str, Any] = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(self.keys[kid].public_key()))
        return {**public, "kid": kid, "use": "sig", "alg": "ES256"}

    def token(self, audience: str, *, kid: str = "k1", **claims: Any) -> str:
        now = int(time.time())
        body = {"iss": self.url, "aud": audience, "sub": "u-1", "iat": now, "exp": now + 300, **claims}
        return jwt.encode(body, self.keys[kid], algorithm="ES256", headers={"kid": kid})

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def issuer() -> Iterator[Issuer]:
    running = Issuer()
    try:
        yield running
    finally:
        running.close()


@pytest.fixture(scope="module")
def trusting(home: HostPaths, issuer: Issuer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    port = free_port()
    args = ("--port", str(port), "--public-url", f"http://127.0.0.1:{port}", "--trust-issuer", issuer.url)
    log = tmp_path_factory.mktemp("resource-server") / "serve.log"
    with HttpServer(home.home, log, *args) as server:
        yield server


def _list_tools(server: HttpServer, token: str) -> httpx.Response:
    headers = {**MCP_HEADERS, "authorization": f"Bearer {token}"}
    return httpx.post(server.url, json=LIST_TOOLS, headers=headers, timeout=30)


def _tool_names(answer: httpx.Response) -> list[str]:
    assert answer.status_code == 200, answer.text
    return sorted(tool["name"] for tool in answer.json()["result"]["tools"])


def test_a_token_of_the_trusted_issuer_gets_what_the_rules_give_its_person(
    trusting: HttpServer, issuer: Issuer
) -> None:
    token = issuer.token(trusting.url, email="alice@acme.com", groups=["eng"], azp="team-portal")
    assert _tool_names(_list_tools(trusting, token)) == [
        "engram_memory_capture",
        "engram_memory_get",
        "engram_memory_request_admission",
        "engram_memory_search",
    ]
    narrowed = issuer.token(trusting.url, email="alice@acme.com", scope="openid engram_memory_search")
    assert _tool_names(_list_tools(trusting, narrowed)) == ["engram_memory_search"]


@pytest.mark.parametrize(
    "case",
    ["other audience", "expired", "contractor", "unverified email", "no such person", "unsigned", "forged"],
)
def test_anything_else_is_refused_with_401(trusting: HttpServer, issuer: Issuer, case: str) -> None:
    person: dict[str, Any] = {"email": "alice@acme.com", "groups": ["eng"]}
    now = int(time.time())
    forger = ec.generate_private_key(ec.SECP256R1())
    token = {
        "other audience": lambda: issuer.token("https://other.example/mcp", **person),
        "expired": lambda: issuer.token(trusting.url, **{**person, "iat": now - 3600, "exp": now - 600}),
        "contractor": lambda: issuer.token(trusting.url, email="carl@acme.com", groups=["contractors"]),
        "unverified email": lambda: issuer.token(trusting.url, email="alice@acme.com", email_verified=False),
        "no such person": lambda: issuer.token(trusting.url, email="eve@evil.example"),
        "unsigned": lambda: jwt.encode(
            {"iss": issuer.url, "aud": trusting.url, "sub": "u", "exp": now + 300, **person}, None, algorithm="none"
        ),
        "forged": lambda: jwt.encode(
            {"iss": issuer.url, "aud": trusting.url, "sub": "u", "exp": now + 300, **person},
            forger,
            algorithm="ES256",
            headers={"kid": "k1"},
        ),
    }[case]()
    answer = _list_tools(trusting, token)
    assert answer.status_code == 401
    assert 'error="invalid_token"' in answer.headers["www-authenticate"]


def test_a_new_signing_key_is_fetched_when_the_issuer_rotates(issuer: Issuer) -> None:
    """In process, without the 30-second pause between fetches for unknown key ids the server keeps."""
    audience = "http://127.0.0.1:1/mcp"
    rules = parse_access_rules(RULES)
    tokens = ExternalTokens(discover(issuer.url, audience), lambda: rules, cooldown_s=0)
    person = {"email": "alice@acme.com", "groups": ["eng"]}
    first = tokens.binding(issuer.token(audience, **person))
    assert first is not None and (first.tenant, first.workspace, first.resource) == ("acme", "team", audience)
    issuer.keys["k9"] = ec.generate_private_key(ec.SECP256R1())
    rotated = tokens.binding(issuer.token(audience, kid="k9", **person))
    assert rotated is not None and rotated.principal == "alice@acme.com"
    assert tokens.binding(issuer.token(audience, kid="k9", **{**person, "aud": "https://x/mcp"})) is None


def test_the_metadata_names_the_trusted_issuer_and_no_sign_in_runs_here(trusting: HttpServer, issuer: Issuer) -> None:
    origin = trusting.url.removesuffix("/mcp")
    metadata = httpx.get(origin + "/.well-known/oauth-protected-resource/mcp", timeout=30).json()
    assert metadata["authorization_servers"] == [issuer.url] and metadata["resource"] == trusting.url
    assert httpx.get(origin + "/.well-known/oauth-authorization-server", timeout=30).status_code == 404
    assert httpx.get(origin + "/authorize", timeout=30).status_code == 404


def test_a_token_scoped_below_what_the_rules_give_is_asked_to_step_up(trusting: HttpServer, issuer: Issuer) -> None:
    narrowed = issuer.token(trusting.url, email="alice@acme.com", groups=["eng"], scope="engram_memory_search")
    headers = {**MCP_HEADERS, "authorization": f"Bearer {narrowed}"}

    def call(name: str) -> httpx.Response:
        request = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": name, "arguments": {}}}
        return httpx.post(trusting.url, json=request, headers=headers, timeout=30)

    capture = call("engram_memory_capture")  # the rules give it; the token's scope does not
    assert capture.status_code == 403
    assert 'scope="engram_memory_capture engram_memory_search"' in capture.headers["www-authenticate"]
    forget = call("engram_memory_forget")  # the rules do not give it: the contract's answer
    assert forget.status_code == 200 and forget.json()["error"]["message"] == "Unknown tool"
