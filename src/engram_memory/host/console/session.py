"""The console's sessions: a one-time login link exchanged for a session cookie, and each session's CSRF token.

The login token is printed once, at start, to the terminal of the person who started the console; it
works once, so a link that leaks later (shell history, a screen share) opens nothing. Sessions live only
in this process: restarting the console ends them all and prints a new link.
"""

from __future__ import annotations

import hmac
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

SESSION_COOKIE = "engram_console"
# The console's language setting: not a secret, kept for a year, read before Accept-Language.
LANGUAGE_COOKIE = "engram_lang"
LANGUAGE_COOKIE_AGE_S = 365 * 24 * 3600
IDLE_LIMIT_S = 8 * 3600
MAX_SESSIONS = 16


@dataclass
class Session:
    session_id: str
    csrf_token: str
    last_seen_s: float


class ConsoleSessions:
    """Thread-safe: the console's handlers run on a thread pool."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic, idle_limit_s: float = IDLE_LIMIT_S) -> None:
        self._clock = clock
        self._idle_limit_s = idle_limit_s
        self._login_token: str | None = secrets.token_urlsafe(32)
        self._sessions: dict[str, Session] = {}
        self._lock = threading.Lock()

    @property
    def login_token(self) -> str:
        """The token of the printed link; empty once it has been used."""
        return self._login_token or ""

    def redeem(self, token: str) -> Session | None:
        """A new session for the login token, once; None for any other token, or the same one again."""
        with self._lock:
            expected = self._login_token
            if expected is None or not hmac.compare_digest(token.encode(), expected.encode()):
                return None
            self._login_token = None
            if len(self._sessions) >= MAX_SESSIONS:
                oldest = min(self._sessions.values(), key=lambda s: s.last_seen_s)
                del self._sessions[oldest.session_id]
            session = Session(secrets.token_urlsafe(32), secrets.token_urlsafe(32), self._clock())
            self._sessions[session.session_id] = session
            return session

    def find(self, session_id: str | None) -> Session | None:
        """The live session of a cookie; an idle one is ended here."""
        if not session_id:
            return None
        with self._lock:
            session = self._sessions.get(session_id)
            if session is None:
                return None
            now = self._clock()
            if now - session.last_seen_s > self._idle_limit_s:
                del self._sessions[session_id]
                return None
            session.last_seen_s = now
            return session

    def end(self, session_id: str) -> None:
        with self._lock:
            self._sessions.pop(session_id, None)


def csrf_matches(session: Session, given: object) -> bool:
    return isinstance(given, str) and hmac.compare_digest(given.encode(), session.csrf_token.encode())
