"""SPEC §2 over streamable HTTP: `serve --http` binds every request by its own host-signed bearer token.

Real `engram-memory serve --http` processes on a real home, the SDK's own client (both protocol eras),
the real host CLI for approvals and revocation, and raw HTTP where the wire itself is the subject
(status codes, challenges, Host and Origin checks, the body cap).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import jwt
import pytest
from mcp.shared.exceptions import MCPError

from engram_memory.contract.schemas import MAX_ARGUMENT_BYTES
from engram_memory.host.keys.files import load_signing_key
from engram_memory.host.settings import HostPaths
from engram_memory.mcp.http import MAX_REQUEST_BODY_BYTES
from tests.host.clirun import assert_one_line_failure, cli
from tests.mcp.helpers import (
    ALL_TOOL_NAMES,
    CAPTURE,
    ERA_PROTOCOL,
    ERAS,
    FORGET,
    GET,
    SEARCH,
    TRUSTED_CONTEXT_CODE,
    TRUSTED_CONTEXT_MESSAGE,
    HostCli,
    admit,
    assert_failure,
    assert_trusted_context_unavailable,
    assert_unknown_tool,
    capture,
    forget_args,
    found_ids,
    get,
    ok_value,
    remember,
    sample_args,
    search,
    unique_word,
)
from tests.support.homes import STORES, Issued, bind, home_on, make_home
from tests.support.http_agents import HttpAgent, HttpServer
from tests.support.payloads import PURPOSE, capture_args

pytestmark = pytest.mark.stdio

OTHER_PURPOSE = "purpose:http-search-only"
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


@dataclass
class Site:
    """One home served by two `serve --http` processes, with the bindings the tests use."""

    paths: HostPaths
    first: HttpServer
    second: HttpServer
    alice: Issued
    searcher: Issued
    scratch: Path

    @property
    def host(self) -> HostCli:
        return HostCli(self.paths)


@pytest.fixture(scope="module", params=STORES)
def site(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    base = tmp_path_factory.mktemp(f"http-{request.param}")
    with (
        home_on(str(request.param), base / "home", request) as paths,
        HttpServer(paths.home, base / "first.log") as first,
        HttpServer(paths.home, base / "first.log") as first,
        HttpServer(paths.home, base / "second.log") as second,
    ):
        yield Site(
            paths=paths,
            first=first,
            second=second,
            alice=bind(paths),
            searcher=bind(
                paths,
                principal="carol",
                agent_id="agent-search",
                session="session-search",
                purpose_ref=OTHER_PURPOSE,
                grants=frozenset({SEARCH}),
            ),
            scratch=base,
        )


@pytest.fixture(params=ERAS)
def era(request: pytest.FixtureRequest) -> str:
    """'legacy' (initialize handshake over stateless HTTP) or 'auto' (the 2026-07-28 single-exchange era)."""
    return str(request.param)


@pytest.fixture
def alice(site: Site, era: str) -> Iterator[HttpAgent]:
    with HttpAgent(site.first.url, site.alice.token, mode=era) as agent:
        yield agent


def _mcp_error(exc: BaseException) -> MCPError | None:
    """The MCPError inside whatever task groups the client wrapped it in while connecting."""
    if isinstance(exc, MCPError):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = _mcp_error(inner)
            if found is not None:
                return found
    return None


def connect_refusal(url: str, token: str | None, era: str) -> MCPError:
    with pytest.raises(BaseException) as caught:  # the SDK wraps the MCPError in task groups
        HttpAgent(url, token, mode=era).close()
    error = _mcp_error(caught.value)
    assert error is not None, repr(caught.value)
    return error


def raw_post(
    url: str, message: dict[str, Any], *, era: str, token: str | None, headers: dict[str, str] | None = None
) -> httpx2.Response:
    """One JSON-RPC POST as a non-SDK client would send it, in the given era's wire shape."""
    sent = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    if token is not None:
        sent["authorization"] = f"Bearer {token}"
    if era != "legacy":
        sent["mcp-protocol-version"] = ERA_PROTOCOL[era]
        sent["mcp-method"] = message["method"]
        message = {**message, "params": {**message.get("params", {}), "_meta": MODERN_META}}
    sent.update(headers or {})
    return httpx2.post(url, content=json.dumps(message).encode("utf-8"), headers=sent, timeout=30)


LIST_TOOLS = {"jsonrpc": "2.0", "id": 7, "method": "tools/list"}


def _tool_names(agent: HttpAgent) -> set[str]:
    return {tool.name for tool in agent.list_tools()}


# -- per-request bindings ---------------------------------------------------------------------------


def test_protocol_era_negotiated_over_http(alice: HttpAgent, era: str) -> None:
    assert alice.protocol_version == ERA_PROTOCOL[era]


def test_tools_list_follows_each_requests_binding_on_one_server(site: Site, era: str) -> None:
    with (
        HttpAgent(site.first.url, site.alice.token, mode=era) as full,
        HttpAgent(site.first.url, site.searcher.token, mode=era) as narrow,
    ):
        for _ in range(3):  # interleaved on the same process: nothing of one request sticks to the next
            assert _tool_names(full) == set(ALL_TOOL_NAMES)
            assert _tool_names(narrow) == {SEARCH}
        [search_tool] = narrow.list_tools()
        assert OTHER_PURPOSE in (search_tool.description or "")
        assert all(PURPOSE in (tool.description or "") for tool in full.list_tools())
        assert_unknown_tool(narrow, CAPTURE, sample_args(CAPTURE, OTHER_PURPOSE))
        ok_value(search(narrow, unique_word("nothing"), purpose=OTHER_PURPOSE))


def test_concurrent_requests_never_see_each_others_binding(site: Site) -> None:
    seen: dict[str, list[set[str]]] = {"full": [], "narrow": []}
    with (
        HttpAgent(site.first.url, site.alice.token) as full,
        HttpAgent(site.first.url, site.searcher.token) as narrow,
    ):

        def hammer(name: str, agent: HttpAgent) -> None:
            for _ in range(40):
                seen[name].append(_tool_names(agent))

        threads = [threading.Thread(target=hammer, args=pair) for pair in (("full", full), ("narrow", narrow))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
    assert seen["full"] == [set(ALL_TOOL_NAMES)] * 40
    assert seen["narrow"] == [{SEARCH}] * 40


def test_capture_admission_search_get_forget_flow_with_cli_approval(site: Site, alice: HttpAgent) -> None:
    word = unique_word("httpflow")
    captured = capture(alice, f"The {word} deploys go through the blue-green pipeline.")
    assert found_ids(alice, word) == []  # pending: not searchable yet
    _, record_id = remember(alice, f"The {word} service is owned by the platform team.")
    assert found_ids(alice, word) == [record_id]
    assert ok_value(get(alice, record_id))["record"]["record_id"] == record_id
    assert captured["candidate_id"] != record_id

    arguments = forget_args(record_id)
    assert_failure(alice.call(FORGET, arguments), "gate_failed")
    request = site.host.only_request(record_id)
    assert request["tool"] == FORGET and request["principal"] == "alice"
    assert site.host.approve(request["id"])["status"] == "approved"
    forgotten = ok_value(alice.call(FORGET, arguments))
    assert forgotten["receipt"]["to_state"] == "tombstoned"
    assert found_ids(alice, word) == []
    assert_failure(get(alice, record_id), "NOT_FOUND")


def test_a_rejected_admission_carries_its_reasons_over_http(alice: HttpAgent) -> None:
    secret = "AKIA" + "IOSFODNN7EXAMPLE"
    captured = capture(alice, f"The {unique_word('httpsecret')} deploy key id is {secret}.")
    outcome = admit(alice, captured["candidate_id"])["outcome"]
    assert (outcome["status"], outcome["reasons"]) == ("rejected", ["secret:cloud_key"])


# -- refusals -----------------------------------------------------------------------------------------


def test_missing_token_trusted_context_unavailable(site: Site, era: str) -> None:
    error = connect_refusal(site.first.url, None, era)
    assert (error.error.code, error.error.message) == (TRUSTED_CONTEXT_CODE, TRUSTED_CONTEXT_MESSAGE)


def test_missing_token_http_401_with_bearer_challenge_and_jsonrpc_error(site: Site, era: str) -> None:
    answer = raw_post(site.first.url, LIST_TOOLS, era=era, token=None)
    assert answer.status_code == 401
    # no authorization server is configured: no metadata to point to (tests/host/oauth for one that is)
    assert answer.headers["www-authenticate"] == 'Bearer realm="engram-memory"'
    assert answer.json() == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": TRUSTED_CONTEXT_CODE, "message": TRUSTED_CONTEXT_MESSAGE},
    }


@pytest.mark.parametrize("path", ["/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"])
def test_no_protected_resource_metadata_without_an_authorization_server(site: Site, path: str) -> None:
    """SPEC 15: the metadata is published only when it names an authorization server; a server whose tokens
    are bindings from `engram-memory bind` names none, and a client probing for OAuth meets a plain 404."""
    origin = site.first.url.removesuffix("/mcp")
    assert httpx2.get(origin + path, timeout=30).status_code == 404
    assert httpx2.get(origin + "/.well-known/oauth-authorization-server", timeout=30).status_code == 404


def _another_audience(paths: HostPaths) -> str:
    """A binding signed with this host's own key, for another audience than this server."""
    token = bind(paths).token
    claims = jwt.decode(token, options={"verify_signature": False})
    header = jwt.get_unverified_header(token)
    claims["aud"] = "some-other-service"
    return jwt.encode(claims, load_signing_key(paths), algorithm="EdDSA", headers={"kid": header["kid"]})


def _alg_none(paths: HostPaths) -> str:
    """The claims of a genuine binding, re-encoded unsigned ('alg: none')."""
    claims = jwt.decode(bind(paths).token, options={"verify_signature": False})
    return jwt.encode(claims, key=None, algorithm="none")


def _tampered(token: str) -> str:
    """The same header and claims with one signature character changed."""
    head, _, signature = token.rpartition(".")
    return f"{head}.{('A' if signature[0] != 'A' else 'B') + signature[1:]}"


FORGERIES = {
    "another_hosts_key": lambda site: bind(make_home(site.scratch / f"forger-{unique_word()}")).token,
    "unsigned_alg_none": lambda site: _alg_none(site.paths),
    "another_audience": lambda site: _another_audience(site.paths),
    "tampered_signature": lambda site: _tampered(site.alice.token),
    "not_a_jwt": lambda _site: "engram-" + unique_word(),
}


@pytest.mark.parametrize("forgery", sorted(FORGERIES))
def test_forged_token_trusted_context_unavailable(site: Site, era: str, forgery: str) -> None:
    token = FORGERIES[forgery](site)
    error = connect_refusal(site.first.url, token, era)
    assert (error.error.code, error.error.message) == (TRUSTED_CONTEXT_CODE, TRUSTED_CONTEXT_MESSAGE)
    answer = raw_post(site.first.url, LIST_TOOLS, era=era, token=token)
    assert answer.status_code == 401
    assert 'error="invalid_token"' in answer.headers["www-authenticate"]
    assert answer.json()["error"]["code"] == TRUSTED_CONTEXT_CODE


def test_forged_token_call_writes_nothing(site: Site) -> None:
    word = unique_word("forgedwrite")
    forged = bind(make_home(site.scratch / f"forger-{unique_word()}")).token
    message = {
        "jsonrpc": "2.0",
        "id": 3,
        "method": "tools/call",
        "params": {"name": CAPTURE, "arguments": capture_args(f"The {word} note from a forger.")},
    }
    assert raw_post(site.first.url, message, era="legacy", token=forged).status_code == 401
    with HttpAgent(site.first.url, site.alice.token) as alice:
        _, record_id = remember(alice, f"The {word} note from the real host.")
        assert found_ids(alice, word) == [record_id]


def test_expired_token_reaches_engine_as_authorization_expired(site: Site, era: str) -> None:
    expired = bind(site.paths, now_s=int(time.time()) - 7200, lifetime_s=60)
    with HttpAgent(site.first.url, expired.token, mode=era) as agent:
        assert _tool_names(agent) == set(ALL_TOOL_NAMES)
        for tool in ALL_TOOL_NAMES:
            assert_failure(agent.call(tool, sample_args(tool)), "AUTHORIZATION_EXPIRED")


def test_revoked_token_authorization_revoked_while_another_binding_works(site: Site, era: str) -> None:
    issued = json.loads(
        site.host.run(
            "bind", "--tenant", "tenant-a", "--workspace", "workspace-1", "--principal", "dave",
            "--agent", "agent-3", "--session", f"session-{era}", "--purpose", PURPOSE, "--all-tools", "--json",
        ).stdout
    )  # fmt: skip
    word = unique_word("revokedhttp")
    with (
        HttpAgent(site.first.url, issued["token"], mode=era) as revoked,
        HttpAgent(site.second.url, site.alice.token, mode=era) as other,
    ):
        _, record_id = remember(revoked, f"The {word} queue is drained nightly.")
        site.host.run("revoke", issued["token_id"])
        for tool in ALL_TOOL_NAMES:
            assert_failure(revoked.call(tool, sample_args(tool)), "AUTHORIZATION_REVOKED")
        assert found_ids(other, word) == [record_id]
    # The revocation is the store's, not one process's: the other server refuses the token too.
    with HttpAgent(site.second.url, issued["token"], mode=era) as elsewhere:
        assert_failure(search(elsewhere, word), "AUTHORIZATION_REVOKED")


@pytest.mark.parametrize("tool", [SEARCH, GET, CAPTURE])
def test_purpose_ref_mismatch_trusted_context_unavailable(alice: HttpAgent, tool: str) -> None:
    assert_trusted_context_unavailable(alice, tool, sample_args(tool, purpose="purpose:somebody-else"))


# -- the wire: DNS rebinding, body cap ---------------------------------------------------------------


def test_foreign_host_header_refused_as_dns_rebinding(site: Site, era: str) -> None:
    answer = raw_post(
        site.first.url, LIST_TOOLS, era=era, token=site.alice.token, headers={"host": f"evil.example:{site.first.port}"}
    )
    assert answer.status_code == 421
    assert "tools" not in answer.text


def test_foreign_origin_refused_as_dns_rebinding(site: Site, era: str) -> None:
    answer = raw_post(
        site.first.url, LIST_TOOLS, era=era, token=site.alice.token, headers={"origin": "http://evil.example"}
    )
    assert answer.status_code == 403


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_own_host_and_origin_accepted(site: Site, era: str, host: str) -> None:
    own = f"{host}:{site.first.port}"
    answer = raw_post(
        site.first.url, LIST_TOOLS, era=era, token=site.alice.token, headers={"host": own, "origin": f"http://{own}"}
    )
    assert answer.status_code == 200, answer.text
    assert {tool["name"] for tool in answer.json()["result"]["tools"]} == set(ALL_TOOL_NAMES)


def _capture_of_size(size: int) -> dict[str, Any]:
    """Valid capture arguments whose compact UTF-8 JSON is exactly `size` bytes (ASCII padding components)."""
    arguments = capture_args(f"The {unique_word('sized')} capture that fills the argument budget.")
    components = arguments["payload"]["components"]

    def measured() -> int:
        return len(json.dumps(arguments, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))

    index = 0
    while measured() < size:
        pad = {"component_id": f"pad{index}", "kind": "context", "text": "x", "citation_ids": ["src"]}
        components.append(pad)
        pad["text"] = "x" * max(1, min(60_000, size - measured() + 1))
        index += 1
    components[-1]["text"] = components[-1]["text"][: len(components[-1]["text"]) - (measured() - size)]
    assert measured() == size
    return arguments


def test_argument_object_at_limit_passes_the_transport(alice: HttpAgent) -> None:
    assert ok_value(alice.call(CAPTURE, _capture_of_size(MAX_ARGUMENT_BYTES)))["status"] == "committed_pending"


def test_argument_object_over_limit_reaches_engine_as_invalid_schema(alice: HttpAgent) -> None:
    assert_failure(alice.call(CAPTURE, _capture_of_size(MAX_ARGUMENT_BYTES + 1)), "INVALID_SCHEMA")


def test_body_over_cap_refused_with_413_before_parsing(site: Site, era: str) -> None:
    message = {"jsonrpc": "2.0", "id": 9, "method": "tools/list", "params": {"pad": "x" * MAX_REQUEST_BODY_BYTES}}
    answer = raw_post(site.first.url, message, era=era, token=site.alice.token)
    assert answer.status_code == 413


def test_a_five_megabyte_capture_is_told_the_limit_and_where(site: Site, era: str) -> None:
    """Over HTTP the body never reaches the engine: the refusal still names the limit, the code and the pointer."""
    arguments = _capture_of_size(5 * 1024 * 1024)
    message = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": CAPTURE, "arguments": arguments}}
    answer = raw_post(site.first.url, message, era=era, token=site.alice.token)
    assert answer.status_code == 413
    error = answer.json()["error"]
    assert error["message"].startswith("INVALID_SCHEMA: ") and f"{MAX_ARGUMENT_BYTES:,} UTF-8 bytes" in error["message"]
    assert 'JSON pointer ""' in error["message"]
    assert error["data"]["engram-memory/invalid"] == {"pointer": "", "rule": "max-bytes"}


# -- statelessness: two processes, one store ---------------------------------------------------------


def test_page_cursor_minted_by_one_process_accepted_by_another(site: Site, era: str) -> None:
    topic = unique_word("pagedhttp")
    with (
        HttpAgent(site.first.url, site.alice.token, mode=era) as one,
        HttpAgent(site.second.url, site.alice.token, mode=era) as two,
    ):
        written = {remember(one if index % 2 else two, f"The {topic} note number {index}.")[1] for index in range(3)}
        seen: list[str] = []
        page = ok_value(search(one, topic, limit=1))
        agents = [two, one]
        while True:
            seen.extend(packet["record"]["record_id"] for packet in page["records"])
            if "next_page_cursor" not in page:
                break
            agent = agents[len(seen) % 2]
            page = ok_value(search(agent, topic, limit=1, page_cursor=page["next_page_cursor"]))
        assert sorted(seen) == sorted(written)


def test_mutation_through_one_process_visible_through_the_other_at_once(site: Site, era: str) -> None:
    word = unique_word("crossprocess")
    with (
        HttpAgent(site.first.url, site.alice.token, mode=era) as one,
        HttpAgent(site.second.url, site.alice.token, mode=era) as two,
    ):
        arguments = capture_args(f"The {word} cache is warmed at boot.")
        first = ok_value(one.call(CAPTURE, arguments))
        replay = ok_value(two.call(CAPTURE, arguments))  # the same key on the other process: replayed
        assert replay["candidate_id"] == first["candidate_id"]
        assert replay["status"] == "duplicate_exact"
        _, record_id = remember(two, f"The {word} cache lives in region one.")
        assert found_ids(one, word) == [record_id]


# -- the command ----------------------------------------------------------------------------------------


def test_serve_http_refuses_non_loopback_address_without_allow_remote(site: Site) -> None:
    line = assert_one_line_failure(cli("serve", "--http", "--host", "0.0.0.0", "--home", site.paths.home))
    assert "0.0.0.0" in line and "plain HTTP" in line and "--allow-remote" in line


def test_serve_http_refuses_a_binding_flag(site: Site) -> None:
    line = assert_one_line_failure(cli("serve", "--http", "--binding", site.alice.token, "--home", site.paths.home))
    assert "--binding" in line and "bearer token" in line


def test_serve_http_port_in_use_one_line_failure(site: Site) -> None:
    line = assert_one_line_failure(cli("serve", "--http", "--port", str(site.first.port), "--home", site.paths.home))
    assert f"127.0.0.1:{site.first.port}" in line


def test_serve_http_refuses_home_without_store(tmp_path: Path) -> None:
    line = assert_one_line_failure(cli("serve", "--http", "--port", "0", "--home", tmp_path / "nothing"))
    assert "init" in line


def test_serve_http_stops_cleanly_on_sigterm(tmp_path: Path) -> None:
    paths = make_home(tmp_path / "home")
    server = HttpServer(paths.home, tmp_path / "serve.log")
    with HttpAgent(server.url, bind(paths).token) as agent:
        assert _tool_names(agent) == set(ALL_TOOL_NAMES)
    assert server.stop() == 0
    assert "Traceback" not in server.stderr()
    assert cli("verify", "--home", paths.home).code == 0


def test_serve_http_allow_remote_listens_on_all_addresses_with_a_warning(tmp_path: Path) -> None:
    paths = make_home(tmp_path / "home")
    with HttpServer(paths.home, tmp_path / "serve.log", "--host", "0.0.0.0", "--allow-remote") as server:
        assert server.url.startswith("http://0.0.0.0:")
        # Behind a proxy the public name is unknown here: the token, not the Host header, authorises.
        answer = raw_post(
            f"http://127.0.0.1:{server.port}/mcp",
            LIST_TOOLS,
            era="legacy",
            token=bind(paths).token,
            headers={"host": f"memory.example.org:{server.port}"},
        )
        assert answer.status_code == 200, answer.text
        assert "TLS-terminating proxy" in server.stderr()
