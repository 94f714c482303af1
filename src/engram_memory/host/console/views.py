"""Rendering: one Jinja environment (autoescaped), the page frame's context, and the constant refusal pages.

A refusal page says the same words for every cause of its status, so nothing about the store, a record
or a token leaks through an error.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any
from urllib.parse import urlencode

from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from engram_memory.host.language.catalogue import N_, _, current, ngettext
from engram_memory.host.language.choice import Language
from engram_memory.host.language.formats import number, when
from engram_memory.host.language.words import label

_ENV = Environment(
    loader=PackageLoader("engram_memory.host.console", "templates"),
    autoescape=select_autoescape(default=True, default_for_string=True),
    trim_blocks=True,
    lstrip_blocks=True,
    extensions=["jinja2.ext.i18n"],
)
_ENV.policies["ext.i18n.trimmed"] = True
_ENV.install_gettext_callables(gettext=_, ngettext=ngettext, newstyle=True)  # type: ignore[attr-defined]

_UNREADABLE_FORM = (
    N_("Not accepted"),
    N_("The form could not be read. Go back, reload the page and try again."),
)
REFUSALS: Mapping[int, tuple[str, str]] = MappingProxyType(
    {
        400: _UNREADABLE_FORM,
        401: (N_("Sign-in needed"), N_("Open the one-time link the console printed in its terminal when it started.")),
        403: (N_("Refused"), N_("This request was refused. Reload the page and try again.")),
        404: (N_("Not found"), N_("There is nothing here.")),
        405: (N_("Not allowed"), N_("This address does not take that kind of request.")),
        409: (
            N_("Not possible now"),
            N_("This can no longer be done in its current state. Reload the page to see it."),
        ),
        411: _UNREADABLE_FORM,
        413: (N_("Too large"), N_("The form was too large.")),
        500: (
            N_("Something went wrong"),
            N_("The console could not finish this request. Nothing was changed by it."),
        ),
        503: (N_("Store unavailable"), N_("The store could not be reached. Try again in a moment.")),
    }
)

NAV = (
    ("queue", "/queue", N_("Review queue")),
    ("confirmations", "/confirmations", N_("Confirmations")),
    ("records", "/records", N_("Records")),
    ("bindings", "/bindings", N_("Bindings")),
    ("apps", "/apps", N_("Connected apps")),
    ("audit", "/audit", N_("Audit")),
    ("health", "/health", N_("Health")),
)
# Each language named in itself, for the console's language setting.
LANGUAGE_NAMES = MappingProxyType({language: language.babel.display_name or language.value for language in Language})

_ENV.filters["when"] = when
_ENV.filters["number"] = number
_ENV.filters["label"] = label
_ENV.globals["items_key"] = lambda ids: items_key(list(ids))


def _frame(path: str, csrf: str) -> dict[str, Any]:
    return {
        "nav": NAV,
        "csrf": csrf,
        "path": path,
        "lang": current().value,
        "languages": LANGUAGE_NAMES,
    }


def render(request: Request, template: str, *, status_code: int = 200, **context: Any) -> HTMLResponse:
    session = getattr(request.state, "session", None)
    frame = _frame(request.url.path, "" if session is None else session.csrf_token)
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
    frame = {**_frame("", ""), "nav": ()}
    html = _ENV.get_template("refusal.html").render(**frame, title=_(title), text=_(text))
    return HTMLResponse(html, status_code=status_code)


def after_decision(location: str, notice: str) -> Response:
    """Post/redirect/get: the page a decision came from, with a notice naming what was done (ids only)."""
    return RedirectResponse(f"{location}?{urlencode({'notice': notice})}", status_code=303)
