"""The pages a person sees between an application's `/authorize` and its redirect: sign in (or enrol with a
one-time code), then consent.

Each page carries the signed pending request (pending.py); a browser session (a random cookie whose
digest the vault keeps) remembers who signed in; the consent form carries a CSRF token bound to that
session and request. Every page forbids framing and caching. The decision returns to the client's
redirect URI with `code`, `state` and `iss` (RFC 9207), or `error=access_denied`.
"""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

import anyio
from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from engram_memory.engine.ports.sign_in import SessionRow
from engram_memory.host.access.people import (
    MIN_PASSWORD_CHARS,
    PeopleError,
    digest,
    enrol,
    identity_of,
    signed_in,
)
from engram_memory.host.access.rules import Access, Identity
from engram_memory.host.language.catalogue import _, current, ngettext, speak
from engram_memory.host.language.choice import from_accept_language
from engram_memory.host.oauth.clients import client_name
from engram_memory.host.oauth.pending import PendingError, PendingRequest, check_csrf, csrf_token, open_request
from engram_memory.host.oauth.provider import SIGN_IN_PATH
from engram_memory.host.oauth.service import GrantRefused, SignInService, identity_from_json, identity_json
from engram_memory.host.oauth.upstream import CALLBACK_PATH, ROUND_TRIP_S, UpstreamError

ENROL_PATH = SIGN_IN_PATH + "/enrol"
UPSTREAM_PATH = SIGN_IN_PATH + "/provider"
TRIP_COOKIE = "engram_sign_in_trip"
CONSENT_PATH = "/consent"
COOKIE = "engram_sign_in"
SESSION_LIFETIME_MS = 12 * 3600 * 1000
MAX_FORM_FIELD = 4096

_TEMPLATES = Environment(
    loader=FileSystemLoader(Path(__file__).parent / "templates"),
    autoescape=select_autoescape(["html"]),
    auto_reload=False,
    extensions=["jinja2.ext.i18n"],
)
_TEMPLATES.policies["ext.i18n.trimmed"] = True
_TEMPLATES.install_gettext_callables(gettext=_, ngettext=ngettext, newstyle=True)  # type: ignore[attr-defined]


def _headers(form_targets: str = "'self'") -> dict[str, str]:
    return {
        "Cache-Control": "no-store",
        "X-Frame-Options": "DENY",
        "Referrer-Policy": "no-referrer",
        "X-Content-Type-Options": "nosniff",
        "Content-Security-Policy": (
            "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none';"
            f" form-action {form_targets}"
        ),
    }


def _page(template: str, status: int = 200, form_targets: str = "'self'", **values: Any) -> HTMLResponse:
    html = _TEMPLATES.get_template(template).render(lang=current().value, **values)
    return HTMLResponse(html, status_code=status, headers=_headers(form_targets))


def message_page(title: str, message: str, status: int) -> HTMLResponse:
    return _page("message.html", status, title=title, message=message, error=status >= 400)


def _speak_to(request: Request) -> None:
    """Each page in the language the person's browser asks for."""
    speak(from_accept_language(request.headers.get("accept-language")))


class SignInPages:
    def __init__(self, service: SignInService, *, secure_cookie: bool) -> None:
        self.service = service
        self._secure = secure_cookie

    def routes(self) -> list[Route]:
        return [
            Route(SIGN_IN_PATH, self.sign_in, methods=["GET", "POST"]),
            Route(ENROL_PATH, self.enrol, methods=["GET", "POST"]),
            Route(UPSTREAM_PATH, self.upstream, methods=["GET"]),
            Route(CALLBACK_PATH, self.callback, methods=["GET"]),
            Route(CONSENT_PATH, self.consent, methods=["GET", "POST"]),
        ]

    async def upstream(self, request: Request) -> Response:
        """To the team's provider, remembering (in a signed cookie) what the callback must check."""
        _speak_to(request)
        sealed = await self._field(request, "request")
        upstream = self.service.upstream()
        try:
            self._pending(sealed)
            if upstream is None:
                return message_page(_("Sign-in failed"), _("This server signs nobody in through a provider."), 404)
            url, trip = await upstream.start(sealed, now_s=self.service.now_ms() // 1000)
        except (PendingError, UpstreamError) as exc:
            return message_page(_("Sign-in failed"), f"{exc}.", 400)
        response = RedirectResponse(url, status_code=303)
        response.headers.update(_headers())
        response.set_cookie(
            TRIP_COOKIE,
            trip,
            max_age=ROUND_TRIP_S,
            httponly=True,
            secure=self._secure,
            samesite="lax",
            path=SIGN_IN_PATH,
        )
        return response

    async def callback(self, request: Request) -> Response:
        _speak_to(request)
        upstream = self.service.upstream()
        code, state = request.query_params.get("code", ""), request.query_params.get("state", "")
        if upstream is None or not code or not state:
            why = request.query_params.get("error_description") or request.query_params.get("error") or "no code"
            return message_page(
                _("Sign-in failed"), _("The provider did not sign you in ({why}).").format(why=why[:200]), 400
            )
        try:
            signed_in = await upstream.finish(code, state, request.cookies.get(TRIP_COOKIE, ""))
            self._pending(signed_in.request)
        except (PendingError, UpstreamError) as exc:
            return message_page(_("Sign-in failed"), f"{exc}.", 400)
        kept = self.service.sealed_upstream_token(signed_in.identity, signed_in.refresh_token)
        response = await self._signed_in_response(signed_in.identity, None, signed_in.request, kept)
        response.delete_cookie(TRIP_COOKIE, path=SIGN_IN_PATH)
        return response

    # -- helpers -------------------------------------------------------------------------------------
    async def _field(self, request: Request, name: str) -> str:
        if request.method == "GET":
            value = request.query_params.get(name, "")
        else:
            form = await request.form(max_files=0, max_fields=16)
            raw = form.get(name, "")
            value = raw if isinstance(raw, str) else ""
        return value[:MAX_FORM_FIELD] if name != "request" else value[: MAX_FORM_FIELD * 4]

    def _pending(self, sealed: str) -> PendingRequest:
        return open_request(self.service.key, sealed, now_s=self.service.now_ms() // 1000)

    async def _client_name(self, client_id: str) -> str:
        row = await anyio.to_thread.run_sync(self.service.store.client, client_id)
        return client_id if row is None else client_name(row.metadata, client_id)

    async def _session(self, request: Request) -> SessionRow | None:
        cookie = request.cookies.get(COOKIE)
        if not cookie:
            return None
        return await anyio.to_thread.run_sync(self.service.store.session, digest(cookie), self.service.now_ms())

    async def _signed_in_response(
        self, identity: Identity, person_id: str | None, sealed: str, upstream_token: str | None = None
    ) -> Response:
        cookie = secrets.token_urlsafe(32)
        now = self.service.now_ms()
        expires = now + SESSION_LIFETIME_MS
        row = SessionRow(digest(cookie), identity_json(identity, person_id), now, expires, upstream_token)
        await anyio.to_thread.run_sync(self.service.store.add_session, row)
        response = RedirectResponse(f"{CONSENT_PATH}?{urlencode({'request': sealed})}", status_code=303)
        response.headers.update(_headers())
        response.set_cookie(
            COOKIE, cookie, max_age=SESSION_LIFETIME_MS // 1000, httponly=True, secure=self._secure, samesite="lax"
        )
        return response

    # -- pages ---------------------------------------------------------------------------------------
    async def sign_in(self, request: Request) -> Response:
        _speak_to(request)
        sealed = await self._field(request, "request")
        try:
            pending = self._pending(sealed)
        except PendingError as exc:
            return message_page(
                _("Sign-in failed"), _("This sign-in link cannot be used: {reason}.").format(reason=exc), 400
            )
        name = await self._client_name(pending.client_id)
        upstream = self.service.upstream()
        values: dict[str, Any] = {
            "title": _("Sign in"),
            "client_name": name,
            "request": sealed,
            "action": SIGN_IN_PATH,
            "enrol_link": f"{ENROL_PATH}?{urlencode({'request': sealed})}",
            "provider": None if upstream is None else upstream.provider,
            "provider_link": f"{UPSTREAM_PATH}?{urlencode({'request': sealed})}",
            "email": "",
        }
        if request.method == "GET":
            if await self._session(request) is not None:
                return RedirectResponse(f"{CONSENT_PATH}?{urlencode({'request': sealed})}", status_code=303)
            return _page("sign_in.html", **values)
        email, password = await self._field(request, "email"), await self._field(request, "password")
        person = await anyio.to_thread.run_sync(signed_in, self.service.store, email, password)
        if person is None:
            wrong = _("The email or the password is wrong (or the account is not enrolled or is disabled).")
            return _page("sign_in.html", 401, **{**values, "error": wrong, "email": email})
        return await self._signed_in_response(
            identity_of(person, self.service.settings.issuer), person.person_id, sealed
        )

    async def enrol(self, request: Request) -> Response:
        _speak_to(request)
        sealed = await self._field(request, "request")
        try:
            self._pending(sealed)
        except PendingError as exc:
            return message_page(
                _("Enrolment failed"), _("This sign-in link cannot be used: {reason}.").format(reason=exc), 400
            )
        values: dict[str, Any] = {
            "title": _("Choose your password"),
            "request": sealed,
            "action": ENROL_PATH,
            "min_chars": MIN_PASSWORD_CHARS,
        }
        if request.method == "GET":
            return _page("enrol.html", **values)
        code, password = await self._field(request, "code"), await self._field(request, "password")
        if password != await self._field(request, "again"):
            return _page("enrol.html", 400, **values, error=_("The two passwords differ."))
        try:
            person = await anyio.to_thread.run_sync(
                lambda: enrol(self.service.store, code.strip(), password, now_ms=self.service.now_ms())
            )
        except PeopleError as exc:
            return _page("enrol.html", 400, **values, error=f"{str(exc).capitalize()}.")
        if person is None:
            return _page(
                "enrol.html", 400, **values, error=_("This code is wrong, used or expired: ask for a new one.")
            )
        return await self._signed_in_response(
            identity_of(person, self.service.settings.issuer), person.person_id, sealed
        )

    async def consent(self, request: Request) -> Response:
        _speak_to(request)
        sealed = await self._field(request, "request")
        try:
            pending = self._pending(sealed)
        except PendingError as exc:
            return message_page(
                _("Authorization failed"), _("This authorization cannot go on: {reason}.").format(reason=exc), 400
            )
        session = await self._session(request)
        if session is None:
            return RedirectResponse(f"{SIGN_IN_PATH}?{urlencode({'request': sealed})}", status_code=303)
        identity, _person = identity_from_json(session.identity)
        try:
            access = self.service.decide(identity)
        except GrantRefused as refused:
            return message_page(_("Access refused"), f"{refused}.", 403)
        if request.method == "GET":
            return await self._consent_form(pending, sealed, session.session_digest, identity, access)
        return await self._decision(request, pending, sealed, session)

    async def _consent_form(
        self, pending: PendingRequest, sealed: str, session_digest: str, identity: Identity, access: Access
    ) -> Response:
        redirect = urlsplit(pending.redirect_uri)
        tools = sorted(access.grants & set(pending.scopes)) if pending.scopes else sorted(access.grants)
        return _page(
            "consent.html",
            form_targets=_form_targets(pending),
            title=_("Allow access?"),
            principal=identity.principal,
            client_name=await self._client_name(pending.client_id),
            client_id=pending.client_id,
            redirect_host=redirect.netloc,
            tenant=access.tenant,
            workspaces=list(access.workspaces),
            tools=tools,
            request=sealed,
            csrf=csrf_token(self.service.key, session_digest, sealed, now_s=self.service.now_ms() // 1000),
            action=CONSENT_PATH,
        )

    async def _decision(
        self,
        request: Request,
        pending: PendingRequest,
        sealed: str,
        session: SessionRow,
    ) -> Response:
        now_s = self.service.now_ms() // 1000
        csrf = await self._field(request, "csrf")
        try:
            check_csrf(self.service.key, csrf, session.session_digest, sealed, now_s=now_s)
        except PendingError:
            return message_page(
                _("Authorization failed"), _("This form did not come from your sign-in: start again."), 403
            )
        answer: dict[str, str] = {"iss": self.service.settings.issuer}
        if pending.state is not None:
            answer["state"] = pending.state
        if await self._field(request, "decision") != "allow":
            answer["error"] = "access_denied"
        else:
            workspace = await self._field(request, "workspace")
            try:
                identity, person_id = identity_from_json(session.identity)
                answer["code"] = await anyio.to_thread.run_sync(
                    lambda: self.service.consent(pending, identity, person_id, workspace, session.upstream_token)
                )
            except GrantRefused as refused:
                return message_page(_("Access refused"), f"{refused}.", 403)
        separator = "&" if urlsplit(pending.redirect_uri).query else "?"
        response = RedirectResponse(pending.redirect_uri + separator + urlencode(answer), status_code=303)
        response.headers.update(_headers(_form_targets(pending)))
        return response


def _form_targets(pending: PendingRequest) -> str:
    """Where the consent form may lead: this server, and the client's redirect URI it returns to."""
    redirect = urlsplit(pending.redirect_uri)
    return f"'self' {redirect.scheme}://{redirect.netloc}"
