"""Host command `serve`: MCP over stdio (one binding) or streamable HTTP (a binding per request)."""

from __future__ import annotations

import logging
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Annotated

import anyio
import typer

from engram_memory.contract.errors import ContractError
from engram_memory.host.binding_file import BindingFileError, read_token_file
from engram_memory.host.cli import reindex as cli_index
from engram_memory.host.cli.common import HomeOption, fail
from engram_memory.host.compose import HomeError, serving_engines, verify_token
from engram_memory.host.keys.files import KeyFileError, load_signing_key
from engram_memory.host.language.catalogue import _, ngettext, speaking
from engram_memory.host.language.choice import DEFAULT
from engram_memory.host.serve.http_guard import BODY_TIMEOUT_S, HEADER_TIMEOUT_S, MAX_CONNECTIONS, GuardSettings
from engram_memory.host.serve.logs import FORMATS, LEVELS, configure
from engram_memory.host.settings import (
    BINDING_FILE_ENV,
    HOUSEKEEPING_INTERVAL_S,
    binding_from_environment,
    resolve_home,
)

if TYPE_CHECKING:
    from engram_memory.engine.engine import Engine
    from engram_memory.host.routed_engines import Serving
    from engram_memory.host.serve.http import SignIn, Tls
    from engram_memory.host.settings import HostPaths


def register(app: typer.Typer) -> None:
    """Adds this module's command to the main `engram-memory` app."""
    app.command("serve")(serve)


# Options that only mean something over HTTP: given without --http they are refused, never ignored.
_HTTP_ONLY = MappingProxyType(
    {
        "host": "--host",
        "port": "--port",
        "allow_remote": "--allow-remote",
        "header_timeout": "--header-timeout",
        "body_timeout": "--body-timeout",
        "max_connections": "--max-connections",
        "metrics_port": "--metrics-port",
        "access_log": "--access-log",
        "public_url": "--public-url",
        "trust_issuer": "--trust-issuer",
        "tls_cert": "--tls-cert",
        "tls_key": "--tls-key",
    }
)


def _checked_binding(
    ctx: typer.Context, http: bool, binding: str | None, binding_file: Path | None
) -> tuple[str | None, Path | None]:
    """The stdio binding token the options give, or the file to read it from (checked readable now; read
    again whenever it changes); refuses options that mean nothing in the mode asked for."""
    file_flag = binding_file is not None and _given(ctx, "binding_file", only_flags=True)
    if http and (binding or file_flag):
        fail(_("--binding is for stdio: over HTTP every request carries its own bearer token"))
    if binding and file_flag:
        fail(_("give the binding once: --binding or --binding-file, not both"))
    if not http:
        ignored = [flag for name, flag in _HTTP_ONLY.items() if _given(ctx, name)]
        if ignored:
            fail(
                ngettext(
                    "{flags} applies only with --http (serve over stdio takes none of them)",
                    "{flags} apply only with --http (serve over stdio takes none of them)",
                    len(ignored),
                ).format(flags=", ".join(ignored))
            )
    if binding_file is not None and not binding and not http:
        return None, _readable_binding_file(binding_file.expanduser())
    return binding, None


def _readable_binding_file(path: Path) -> Path:
    try:
        read_token_file(path)
    except BindingFileError as exc:
        fail(str(exc))
    return path


def _authorization(
    stack: ExitStack, paths: HostPaths, public_url: str | None, trust_issuer: str | None, owner: Engine
) -> SignIn | None:
    """This host's own sign-in (--public-url), another issuer's tokens (--trust-issuer), or neither."""
    from engram_memory.host.serve.sign_in import sign_in_for, trusting

    if public_url is None:
        if trust_issuer is not None:
            fail(_("--trust-issuer needs --public-url (the address the tokens' audience names)"))
        return None
    if trust_issuer is not None:
        return stack.enter_context(trusting(paths, public_url, trust_issuer, owner))
    return stack.enter_context(sign_in_for(paths, public_url, owner))


def _tls(certificate: Path | None, key: Path | None) -> Tls | None:
    from engram_memory.host.serve.http import Tls

    if certificate is None and key is None:
        return None
    if certificate is None or key is None:
        fail(_("--tls-cert and --tls-key go together"))
    for path in (certificate, key):
        if not path.is_file():
            fail(_("cannot read {path}: no such file").format(path=path))
    return Tls(certificate=certificate, key=key)


def _given(ctx: typer.Context, name: str, *, only_flags: bool = False) -> bool:
    """Whether the person set the option (on the command line, or also by its variable)."""
    source = ctx.get_parameter_source(name)
    if source is None:
        return False
    return source.name == "COMMANDLINE" if only_flags else source.name != "DEFAULT"


def serve(
    ctx: typer.Context,
    binding: Annotated[str | None, typer.Option("--binding", help="The binding token (else ENGRAM_BINDING).")] = None,
    binding_file: Annotated[
        Path | None,
        typer.Option(
            "--binding-file",
            envvar=BINDING_FILE_ENV,
            help="A file holding the binding token, so that it need not sit in a client's config.",
            show_envvar=True,
        ),
    ] = None,
    http: Annotated[
        bool, typer.Option("--http", help="Serve streamable HTTP: each request's bearer token is its binding.")
    ] = False,
    host: Annotated[str, typer.Option("--host", help="With --http: the address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="With --http: the port (0 picks one).")] = 8765,
    allow_remote: Annotated[
        bool, typer.Option("--allow-remote", help="With --http: allow a non-loopback address (TLS in front!).")
    ] = False,
    housekeeping_every: Annotated[
        float, typer.Option("--housekeeping-every", min=1.0, help="Seconds between expiry and key sweeps.")
    ] = HOUSEKEEPING_INTERVAL_S,
    header_timeout: Annotated[
        float,
        typer.Option(
            "--header-timeout", min=0.1, help="With --http: seconds a connection has to send a request's headers."
        ),
    ] = HEADER_TIMEOUT_S,
    body_timeout: Annotated[
        float,
        typer.Option(
            "--body-timeout", min=0.1, help="With --http: seconds from a request's headers to its body's end."
        ),
    ] = BODY_TIMEOUT_S,
    max_connections: Annotated[
        int, typer.Option("--max-connections", min=1, help="With --http: open connections at most.")
    ] = MAX_CONNECTIONS,
    metrics_port: Annotated[
        int | None,
        typer.Option("--metrics-port", min=0, max=65535, help="With --http: Prometheus metrics on 127.0.0.1:PORT."),
    ] = None,
    access_log: Annotated[
        bool, typer.Option("--access-log", help="With --http: one log line per request (never a header or body).")
    ] = False,
    public_url: Annotated[
        str | None,
        typer.Option(
            "--public-url",
            help="With --http: the origin people and clients reach this server at (https://memory.example.com);"
            " makes it the OAuth authorization server of its /mcp endpoint (needs access.toml).",
        ),
    ] = None,
    trust_issuer: Annotated[
        str | None,
        typer.Option(
            "--trust-issuer",
            help="With --http --public-url: accept JWT access tokens from this authorization server (the team's"
            " own; audience the /mcp URL) instead of signing people in here; access.toml maps their claims.",
        ),
    ] = None,
    tls_cert: Annotated[
        Path | None, typer.Option("--tls-cert", help="With --http: serve HTTPS with this certificate (PEM).")
    ] = None,
    tls_key: Annotated[Path | None, typer.Option("--tls-key", help="With --http: the certificate's key (PEM).")] = None,
    log_level: Annotated[str, typer.Option("--log-level", help="debug, info, warning or error.")] = "info",
    log_format: Annotated[str, typer.Option("--log-format", help="text, or json (one object a line).")] = "text",
    home: HomeOption = None,
) -> None:
    """Serve MCP over stdio (one binding), or over streamable HTTP with --http (a binding per request)."""
    if log_level.lower() not in LEVELS:
        fail(_("--log-level takes one of {choices}").format(choices=", ".join(LEVELS)))
    if log_format.lower() not in FORMATS:
        fail(_("--log-format takes one of {choices}").format(choices=", ".join(FORMATS)))
    configure(log_level.lower(), log_format.lower())
    paths = resolve_home(home)
    binding, binding_path = _checked_binding(ctx, http, binding, binding_file)
    web = HttpOptions(
        host,
        port,
        allow_remote,
        GuardSettings(header_timeout, body_timeout, max_connections),
        metrics_port,
        access_log,
        public_url,
        trust_issuer,
        _tls(tls_cert, tls_key),
    )
    try:
        if http:
            _serve_http(paths, web, housekeeping_every)
        else:
            _serve_stdio(paths, binding, binding_path, housekeeping_every)
    except (HomeError, KeyFileError) as exc:
        fail(str(exc))
    except ContractError as exc:
        fail(_("the store is unavailable ({code})").format(code=exc.code.value))


@dataclass(frozen=True)
class HttpOptions:
    host: str
    port: int
    allow_remote: bool
    guard: GuardSettings
    metrics_port: int | None
    access_log: bool
    public_url: str | None
    trust_issuer: str | None
    tls: Tls | None


def _checked_at_start(serving: Serving) -> None:
    """Indexes built by another tokenizer or model are moved first (a stale scope cannot be searched); a
    store that fails its start-up check is refused rather than allowed to answer wrongly."""
    log = logging.getLogger("engram_memory.serve")
    for checked in serving.owners:
        cli_index.serve_reindex(checked, log.info)
        first = checked.verify(full=False).first
        if first is not None:
            fail(_("{line}; run engram-memory verify").format(line=first.line))


def _serve_http(paths: HostPaths, web: HttpOptions, housekeeping_every: float) -> None:
    from engram_memory.host.serve.http import ListenError, refuse_unsafe_address, serve_http
    from engram_memory.host.serve.sign_in import SignInSetupError

    try:
        refuse_unsafe_address(web.host, web.allow_remote)
        with serving_engines(paths) as serving, ExitStack() as stack:
            _checked_at_start(serving)
            serve_http(
                serving.agents,
                serving.owner,
                load_signing_key(paths).public_key(),
                host=web.host,
                port=web.port,
                housekeeping_every_s=housekeeping_every,
                settings=web.guard,
                metrics_port=web.metrics_port,
                access_log=web.access_log,
                sign_in=_authorization(stack, paths, web.public_url, web.trust_issuer, serving.owner),
                tls=web.tls,
                owners=serving.owners,
            )
    except (ListenError, SignInSetupError) as exc:
        fail(str(exc))


def _serve_stdio(paths: HostPaths, binding: str | None, binding_path: Path | None, housekeeping_every: float) -> None:
    from engram_memory.host.serve.stdio import serve_with_housekeeping
    from engram_memory.host.serve.stdio_binding import StdioBinding
    from engram_memory.mcp.server import build_server

    log = logging.getLogger("engram_memory.serve")
    with serving_engines(paths) as serving:
        _checked_at_start(serving)
        # From here on the words are a client's (why a binding is refused) and the log's: the contract's
        # English, whatever language the person who started the server reads.
        with speaking(DEFAULT):
            source = StdioBinding(
                lambda token: verify_token(paths, token),
                serving.owner.binding_unusable,
                token=None if binding_path is not None else binding_from_environment(binding),
                path=binding_path,
            )
            line, warning = source.describe()
            (log.warning if warning else log.info)(line)
            server = build_server(serving.agents, lambda _ctx: source.binding())
            anyio.run(serve_with_housekeeping, server, serving.owners, housekeeping_every, source.refusal)
