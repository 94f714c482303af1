"""The console's Starlette app: its routes, the login exchange, and the constant pages for unknown routes."""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from engram_memory.host.console import apps, audit, bindings, confirmations, health, queue, records
from engram_memory.host.console.context import Console, action, page, session_of
from engram_memory.host.console.guard import ConsoleGuard
from engram_memory.host.console.session import (
    IDLE_LIMIT_S,
    LANGUAGE_COOKIE,
    LANGUAGE_COOKIE_AGE_S,
    SESSION_COOKIE,
    ConsoleSessions,
)
from engram_memory.host.console.views import refusal
from engram_memory.host.language.choice import from_tag


def _login(request: Request) -> Response:
    """The printed link's one use: a session cookie, then the queue (the token leaves the address bar)."""
    sessions: ConsoleSessions = request.app.state.sessions
    token = request.query_params.get("token", "")
    session = sessions.redeem(token) if token else None
    if session is None:
        return refusal(401)
    response = RedirectResponse("/queue", status_code=303)
    response.set_cookie(
        SESSION_COOKIE,
        session.session_id,
        max_age=IDLE_LIMIT_S,
        path="/",
        httponly=True,
        samesite="strict",
    )
    return response


def _logout(request: Request, form: FormData) -> Response:
    sessions: ConsoleSessions = request.app.state.sessions
    sessions.end(session_of(request).session_id)
    response = refusal(401)
    response.delete_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="strict")
    return response


def _language(request: Request) -> Response:
    """The language setting: remembered in a cookie, then back to the page it was chosen on (a path of
    this console only, so the link cannot send anyone elsewhere)."""
    language = from_tag(request.query_params.get("to", ""))
    if language is None:
        return refusal(400)
    back = request.query_params.get("back", "")
    if not back.startswith("/") or back.startswith("//") or "\\" in back or len(back) > 512:
        back = "/queue"
    response = RedirectResponse(back, status_code=303)
    response.set_cookie(LANGUAGE_COOKIE, language.value, max_age=LANGUAGE_COOKIE_AGE_S, path="/", samesite="strict")
    return response


async def _http_error(request: Request, exc: Exception) -> Response:
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    return refusal(status if status in (404, 405) else 500)


def build_console(console: Console, sessions: ConsoleSessions) -> ConsoleGuard:
    routes = [
        Route("/", lambda request: RedirectResponse("/queue", status_code=303)),
        Route("/login", page(_login)),
        Route("/logout", action(_logout), methods=["POST"]),
        Route("/language", _language),
        Route("/queue", page(queue.queue_page)),
        Route("/queue/live", page(queue.queue_live)),
        Route("/queue/decide", action(queue.queue_decide), methods=["POST"]),
        Route("/confirmations", page(confirmations.confirmations_page)),
        Route("/confirmations/live", page(confirmations.confirmations_live)),
        Route("/confirmations/decide", action(confirmations.confirmation_decide), methods=["POST"]),
        Route("/records", page(records.records_page)),
        Route("/records/search", action(records.records_search), methods=["POST"]),
        Route("/records/export", page(records.records_export)),
        Route("/records/{record_id}", page(records.record_page)),
        Route("/records/{record_id}/action", action(records.record_action), methods=["POST"]),
        Route("/bindings", page(bindings.bindings_page)),
        Route("/bindings/revoke", action(bindings.bindings_revoke), methods=["POST"]),
        Route("/apps", page(apps.apps_page)),
        Route("/apps/revoke", action(apps.apps_revoke), methods=["POST"]),
        Route("/apps/turn-away", action(apps.apps_turn_away), methods=["POST"]),
        Route("/audit", page(audit.audit_page)),
        Route("/health", page(health.health_page)),
        Route("/health/verify", action(health.health_verify), methods=["POST"]),
        Mount("/static", StaticFiles(packages=[("engram_memory.host.console", "static")]), name="static"),
    ]
    app = Starlette(routes=routes, exception_handlers={HTTPException: _http_error})
    app.state.console = console
    app.state.sessions = sessions
    app.state.last_verify = None
    return ConsoleGuard(app, sessions)
