"""The console's door: the session, the Host header, body limits, security headers, and constant failures.

Every request but the login link and the stylesheet needs a live session cookie; a page asked for
without one is sent to the login notice (303), anything else is refused (401). Only loopback Host
headers are served, so a web page elsewhere cannot reach the console through DNS rebinding. A handler's
exception becomes the constant 500 page; only its type is logged, never its message (it may quote
memory text or a token).
"""

from __future__ import annotations

import logging
from http.cookies import SimpleCookie
from types import MappingProxyType

from starlette.datastructures import Headers
from starlette.responses import RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from engram_memory.host.console.session import LANGUAGE_COOKIE, SESSION_COOKIE, ConsoleSessions
from engram_memory.host.console.views import refusal
from engram_memory.host.language.catalogue import speak
from engram_memory.host.language.choice import Language, from_accept_language, from_tag

OPEN_PATHS = frozenset({"/login"})
OPEN_PREFIX = "/static/"
MAX_BODY_BYTES = 64 * 1024
_LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "[::1]"})
_HEADERS = MappingProxyType(
    {
        "content-security-policy": "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self'; "
        "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        "x-content-type-options": "nosniff",
        "x-frame-options": "DENY",
        "referrer-policy": "same-origin",
        "cache-control": "no-store",
    }
)
_log = logging.getLogger("engram_memory.console")


def _cookie(headers: Headers, name: str = SESSION_COOKIE) -> str | None:
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(headers.get("cookie", ""))
    except Exception:
        return None
    morsel = jar.get(name)
    return None if morsel is None else morsel.value


def request_language(headers: Headers) -> Language:
    """The console's own setting (a cookie) wins over the browser's Accept-Language."""
    chosen = _cookie(headers, LANGUAGE_COOKIE)
    language = from_tag(chosen) if chosen else None
    return language if language is not None else from_accept_language(headers.get("accept-language"))


def loopback_host(headers: Headers) -> bool:
    host = headers.get("host", "")
    name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
    return name in _LOOPBACK_HOSTS


class ConsoleGuard:
    def __init__(self, app: ASGIApp, sessions: ConsoleSessions) -> None:
        self._app = app
        self._sessions = sessions

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        speak(request_language(headers))
        started = False

        async def send_with_headers(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                extra = [(name.encode(), value.encode()) for name, value in _HEADERS.items()]
                message["headers"] = [*message.get("headers", []), *extra]
            await send(message)

        refused = self._refused(scope, headers)
        if refused is not None:
            await refused(scope, receive, send_with_headers)
            return
        try:
            await self._app(scope, receive, send_with_headers)
        except Exception as exc:
            _log.error("console request failed: %s", type(exc).__name__)
            if not started:
                await refusal(500)(scope, receive, send_with_headers)

    def _refused(self, scope: Scope, headers: Headers) -> Response | None:
        if not loopback_host(headers):
            return refusal(403)
        method: str = scope["method"]
        if method == "POST":
            too_big = _body_refusal(headers)
            if too_big is not None:
                return too_big
        path: str = scope["path"]
        if path in OPEN_PATHS or path.startswith(OPEN_PREFIX):
            return None
        session = self._sessions.find(_cookie(headers))
        if session is None:
            if method in ("GET", "HEAD") and headers.get("x-console-fragment") is None:
                return RedirectResponse("/login", status_code=303)
            return refusal(401)
        scope.setdefault("state", {})["session"] = session
        return None


def _body_refusal(headers: Headers) -> Response | None:
    """A form's length must be stated and small: the console reads whole bodies, so it caps them first."""
    length = headers.get("content-length")
    if length is None or not length.isdigit():
        return refusal(411)
    return refusal(413) if int(length) > MAX_BODY_BYTES else None
