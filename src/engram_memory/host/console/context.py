"""What every console handler works with: the host's engine, its home, and who is deciding.

One engine for the console's life, opened as the host (the owner role on PostgreSQL), shared by the
handlers' threads as `serve` shares its engine. Endpoints are wrapped here: a page runs its handler on
a worker thread; a form first has its CSRF token and origin checked, then does the same.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import anyio.to_thread
from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import Response

from engram_memory.contract.errors import ContractError
from engram_memory.engine.engine import Engine
from engram_memory.host.console.session import Session, csrf_matches
from engram_memory.host.console.views import refusal
from engram_memory.host.settings import HostPaths

MAX_FIELDS = 32
Endpoint = Callable[[Request], Awaitable[Response]]


@dataclass(frozen=True)
class Console:
    engine: Engine
    paths: HostPaths
    decided_by: str


def console_of(request: Request) -> Console:
    console: Console = request.app.state.console
    return console


def session_of(request: Request) -> Session:
    session: Session = request.state.session
    return session


def _guarded(handler: Callable[[], Response]) -> Response:
    try:
        return handler()
    except ContractError:
        return refusal(503)


def page(handler: Callable[[Request], Response]) -> Endpoint:
    async def endpoint(request: Request) -> Response:
        return await anyio.to_thread.run_sync(_guarded, lambda: handler(request))

    return endpoint


def _same_origin(request: Request) -> bool:
    """Browsers send Origin with every POST; one from another site is refused even with a token."""
    origin = request.headers.get("origin")
    if origin is None or origin == "null":
        return origin is None
    host = request.headers.get("host", "")
    return origin in (f"http://{host}", f"https://{host}")


def action(handler: Callable[[Request, FormData], Response]) -> Endpoint:
    async def endpoint(request: Request) -> Response:
        try:
            form = await request.form(max_files=0, max_fields=MAX_FIELDS)
        except Exception:
            return refusal(400)
        if not csrf_matches(session_of(request), form.get("csrf")) or not _same_origin(request):
            return refusal(403)
        return await anyio.to_thread.run_sync(_guarded, lambda: handler(request, form))

    return endpoint


def text_field(form: FormData, name: str, *, limit: int = 2048) -> str | None:
    """A form's text field, stripped; None when absent, empty, or not text; over `limit` characters too."""
    value = form.get(name)
    if not isinstance(value, str):
        return None
    value = value.strip()
    return value if value and len(value) <= limit else None


def reason_field(form: FormData) -> str | None:
    """A reason ref as typed, stripped; None when left empty. Never cut short: the engine refuses one
    that breaks the ref rule, so a decision is never recorded with less than the person wrote."""
    value = form.get("reason")
    if not isinstance(value, str) or not value.strip():
        return None
    return value.strip()
