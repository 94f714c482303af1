"""Rendering: one Jinja environment (autoescaped), the page frame's context, and the constant refusal pages.

A refusal page says the same words for every cause of its status, so nothing about the store, a record
or a token leaks through an error.
"""

from __future__ import annotations

import hashlib
from typing import Any
from urllib.parse import urlencode

from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from engram_memory.contract.instants import format_instant

_ENV = Environment(
    loader=PackageLoader("engram_memory.host.console", "templates"),
    autoescape=select_autoescape(default=True, default_for_string=True),
    trim_blocks=True,
    lstrip_blocks=True,
)

REFUSALS: dict[int, tuple[str, str]] = {
    400: ("Not accepted", "The form could not be read. Go back, reload the page and try again."),
    401: ("Sign-in needed", "Open the one-time link the console printed in its terminal when it started."),
    403: ("Refused", "This request was refused. Reload the page and try again."),
    404: ("Not found", "There is nothing here."),
    405: ("Not allowed", "This address does not take that kind of request."),
    409: ("Not possible now", "This can no longer be done in its current state. Reload the page to see it."),
    411: ("Not accepted", "The form could not be read. Go back, reload the page and try again."),
    413: ("Too large", "The form was too large."),
    500: ("Something went wrong", "The console could not finish this request. Nothing was changed by it."),
    503: ("Store unavailable", "The store could not be reached. Try again in a moment."),
}

NAV = (
    ("queue", "/queue", "Review queue"),
    ("confirmations", "/confirmations", "Confirmations"),
    ("records", "/records", "Records"),
    ("bindings", "/bindings", "Bindings"),
    ("apps", "/apps", "Connected apps"),
    ("audit", "/audit", "Audit"),
    ("health", "/health", "Health"),
)


def when(epoch_ms: int | None) -> str:
    if epoch_ms is None:
        return "-"
    try:
        return format_instant(epoch_ms)
    except (OverflowError, ValueError, OSError):
        return f"{epoch_ms} ms"


_ENV.filters["when"] = when
_ENV.globals["items_key"] = lambda ids: items_key(list(ids))


def render(request: Request, template: str, *, status_code: int = 200, **context: Any) -> HTMLResponse:
    session = getattr(request.state, "session", None)
    frame = {"nav": NAV, "csrf": "" if session is None else session.csrf_token, "path": request.url.path}
    html = _ENV.get_template(template).render(**frame, **context)
    return HTMLResponse(html, status_code=status_code)


def fragment(template: str, **context: Any) -> str:
    """A template rendered alone: the live parts of a page, refreshed in place."""
    return _ENV.get_template(template).render(**context)


def items_key(ids: list[str]) -> str:
    """What a live list shows, as one short value: the page replaces the list only when it changes, so
    an element a person is about to click is not swapped under them by a refresh that changed nothing."""
    return hashlib.sha256("\n".join(ids).encode()).hexdigest()[:16]


def live(html: str, ids: list[str]) -> HTMLResponse:
    return HTMLResponse(html, headers={"x-console-items": items_key(ids)})


def refusal(status_code: int) -> HTMLResponse:
    title, text = REFUSALS.get(status_code, REFUSALS[500])
    html = _ENV.get_template("refusal.html").render(title=title, text=text, nav=(), csrf="", path="")
    return HTMLResponse(html, status_code=status_code)


def after_decision(location: str, notice: str) -> Response:
    """Post/redirect/get: the page a decision came from, with a notice naming what was done (ids only)."""
    return RedirectResponse(f"{location}?{urlencode({'notice': notice})}", status_code=303)
