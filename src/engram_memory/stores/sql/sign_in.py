"""The vault's sign-in tables behind the SignInStore port, written once for both vaults.

Each method runs in one transaction the vault opens (`Transaction`); the statements use `?`, which the
PostgreSQL adapter rewrites. A single-use secret is spent by one conditional UPDATE, so two requests
presenting the same code or refresh token at once cannot both be first.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any

from engram_memory.engine.ports.sign_in import ClientRow, CodeRow, GrantRow, PersonRow, RefreshRow, SessionRow
from engram_memory.stores.sql.connection import SqlConnection

Transaction = Callable[[], AbstractContextManager[SqlConnection]]

_PERSON = (
    "person_id, email, groups, password_hash, enrolment_digest, enrolment_expires_at_ms, created_at_ms,"
    " created_by, disabled_at_ms"
)
_CLIENT = "client_id, metadata, secret_digest, source, registered_at_ms, revoked_at_ms"
_GRANT = (
    "grant_id, client_id, principal, identity, workspace, scopes, resource, created_at_ms, expires_at_ms,"
    " revoked_at_ms, revoked_reason, upstream_token"
)
_CODE = "code_digest, grant_id, redirect_uri, redirect_uri_explicit, code_challenge, expires_at_ms, used_at_ms"
_REFRESH = "token_digest, grant_id, issued_at_ms, expires_at_ms, used_at_ms"
_SESSION = "session_digest, identity, created_at_ms, expires_at_ms, upstream_token"


def _marks(columns: str) -> str:
    return ", ".join("?" for _ in columns.split(","))


def _int(value: Any) -> int | None:
    return None if value is None else int(value)


def _person(row: Sequence[Any]) -> PersonRow:
    return PersonRow(
        person_id=str(row[0]),
        email=str(row[1]),
        groups=tuple(json.loads(str(row[2]))),
        password_hash=None if row[3] is None else str(row[3]),
        enrolment_digest=None if row[4] is None else str(row[4]),
        enrolment_expires_at_ms=_int(row[5]),
        created_at_ms=int(row[6]),
        created_by=str(row[7]),
        disabled_at_ms=_int(row[8]),
    )


def _person_values(row: PersonRow) -> tuple[object, ...]:
    return (
        row.person_id,
        row.email,
        json.dumps(sorted(row.groups)),
        row.password_hash,
        row.enrolment_digest,
        row.enrolment_expires_at_ms,
        row.created_at_ms,
        row.created_by,
        row.disabled_at_ms,
    )


def _client(row: Sequence[Any]) -> ClientRow:
    return ClientRow(
        client_id=str(row[0]),
        metadata=str(row[1]),
        secret_digest=None if row[2] is None else str(row[2]),
        source=str(row[3]),
        registered_at_ms=int(row[4]),
        revoked_at_ms=_int(row[5]),
    )


def _grant(row: Sequence[Any]) -> GrantRow:
    return GrantRow(
        grant_id=str(row[0]),
        client_id=str(row[1]),
        principal=str(row[2]),
        identity=str(row[3]),
        workspace=str(row[4]),
        scopes=tuple(json.loads(str(row[5]))),
        resource=str(row[6]),
        created_at_ms=int(row[7]),
        expires_at_ms=int(row[8]),
        revoked_at_ms=_int(row[9]),
        revoked_reason=None if row[10] is None else str(row[10]),
        upstream_token=None if row[11] is None else str(row[11]),
    )


def _code(row: Sequence[Any]) -> CodeRow:
    return CodeRow(
        code_digest=str(row[0]),
        grant_id=str(row[1]),
        redirect_uri=str(row[2]),
        redirect_uri_explicit=bool(row[3]),
        code_challenge=str(row[4]),
        expires_at_ms=int(row[5]),
        used_at_ms=_int(row[6]),
    )


def _refresh(row: Sequence[Any]) -> RefreshRow:
    return RefreshRow(
        token_digest=str(row[0]),
        grant_id=str(row[1]),
        issued_at_ms=int(row[2]),
        expires_at_ms=int(row[3]),
        used_at_ms=_int(row[4]),
    )


class SqlSignInStore:
    """The SignInStore port over one vault's connection; `tx` opens a transaction that commits on exit."""

    def __init__(self, tx: Transaction) -> None:
        self._tx = tx

    # -- people ------------------------------------------------------------------------------------
    def add_person(self, row: PersonRow) -> bool:
        with self._tx() as db:
            if db.execute("SELECT 1 FROM people WHERE email = ?", (row.email,)).fetchone() is not None:
                return False
            db.execute(f"INSERT INTO people ({_PERSON}) VALUES ({_marks(_PERSON)})", _person_values(row))  # noqa: S608
            return True

    def person(self, person_id: str) -> PersonRow | None:
        with self._tx() as db:
            found = db.execute(f"SELECT {_PERSON} FROM people WHERE person_id = ?", (person_id,)).fetchone()  # noqa: S608
        return None if found is None else _person(found)

    def person_by_email(self, email: str) -> PersonRow | None:
        with self._tx() as db:
            found = db.execute(f"SELECT {_PERSON} FROM people WHERE email = ?", (email,)).fetchone()  # noqa: S608
        return None if found is None else _person(found)

    def people(self) -> list[PersonRow]:
        with self._tx() as db:
            rows = db.execute(f"SELECT {_PERSON} FROM people ORDER BY email").fetchall()  # noqa: S608
        return [_person(row) for row in rows]

    def update_person(self, row: PersonRow) -> None:
        values = _person_values(row)
        with self._tx() as db:
            db.execute(
                "UPDATE people SET email = ?, groups = ?, password_hash = ?, enrolment_digest = ?,"
                " enrolment_expires_at_ms = ?, created_at_ms = ?, created_by = ?, disabled_at_ms = ?"
                " WHERE person_id = ?",
                (*values[1:], row.person_id),
            )

    def enrol(self, enrolment_digest: str, password_hash: str, now_ms: int) -> PersonRow | None:
        with self._tx() as db:
            found = db.execute(
                "SELECT person_id FROM people"
                " WHERE enrolment_digest = ? AND enrolment_expires_at_ms > ? AND disabled_at_ms IS NULL",
                (enrolment_digest, now_ms),
            ).fetchone()
            if found is None:
                return None
            spent = db.execute(
                "UPDATE people SET password_hash = ?, enrolment_digest = NULL, enrolment_expires_at_ms = NULL"
                " WHERE person_id = ? AND enrolment_digest = ?",
                (password_hash, found[0], enrolment_digest),
            ).rowcount
            if spent != 1:  # spent by another request meanwhile
                return None
            enrolled = db.execute(f"SELECT {_PERSON} FROM people WHERE person_id = ?", (found[0],)).fetchone()  # noqa: S608
        return _person(enrolled)

    # -- clients -----------------------------------------------------------------------------------
    def put_client(self, row: ClientRow) -> None:
        values = (row.client_id, row.metadata, row.secret_digest, row.source, row.registered_at_ms, row.revoked_at_ms)
        with self._tx() as db:
            known = db.execute("SELECT source FROM oauth_clients WHERE client_id = ?", (row.client_id,)).fetchone()
            if known is None:
                db.execute(f"INSERT INTO oauth_clients ({_CLIENT}) VALUES ({_marks(_CLIENT)})", values)  # noqa: S608
            elif str(known[0]) == "document" and row.source == "document":
                db.execute("UPDATE oauth_clients SET metadata = ? WHERE client_id = ?", (row.metadata, row.client_id))

    def revoke_client(self, client_id: str, at_ms: int) -> bool:
        with self._tx() as db:
            done = db.execute(
                "UPDATE oauth_clients SET revoked_at_ms = ? WHERE client_id = ? AND revoked_at_ms IS NULL",
                (at_ms, client_id),
            )
            return int(done.rowcount) == 1

    def client(self, client_id: str) -> ClientRow | None:
        with self._tx() as db:
            found = db.execute(f"SELECT {_CLIENT} FROM oauth_clients WHERE client_id = ?", (client_id,)).fetchone()  # noqa: S608
        return None if found is None else _client(found)

    # -- grants ------------------------------------------------------------------------------------
    def add_grant(self, row: GrantRow) -> None:
        values = (
            row.grant_id,
            row.client_id,
            row.principal,
            row.identity,
            row.workspace,
            json.dumps(sorted(row.scopes)),
            row.resource,
            row.created_at_ms,
            row.expires_at_ms,
            row.revoked_at_ms,
            row.revoked_reason,
            row.upstream_token,
        )
        with self._tx() as db:
            db.execute(f"INSERT INTO oauth_grants ({_GRANT}) VALUES ({_marks(_GRANT)})", values)  # noqa: S608

    def grant(self, grant_id: str) -> GrantRow | None:
        with self._tx() as db:
            found = db.execute(f"SELECT {_GRANT} FROM oauth_grants WHERE grant_id = ?", (grant_id,)).fetchone()  # noqa: S608
        return None if found is None else _grant(found)

    def reidentify_grant(self, grant_id: str, identity: str, upstream_token: str | None) -> None:
        with self._tx() as db:
            db.execute(
                "UPDATE oauth_grants SET identity = ?, upstream_token = ? WHERE grant_id = ?",
                (identity, upstream_token, grant_id),
            )

    def grants(self, *, principal: str | None = None) -> list[GrantRow]:
        with self._tx() as db:
            if principal is None:
                rows = db.execute(f"SELECT {_GRANT} FROM oauth_grants ORDER BY created_at_ms, grant_id").fetchall()  # noqa: S608
            else:
                rows = db.execute(
                    f"SELECT {_GRANT} FROM oauth_grants WHERE principal = ? ORDER BY created_at_ms, grant_id",  # noqa: S608
                    (principal,),
                ).fetchall()
        return [_grant(row) for row in rows]

    def revoke_grant(self, grant_id: str, at_ms: int, reason: str) -> bool:
        with self._tx() as db:
            return (
                db.execute(
                    "UPDATE oauth_grants SET revoked_at_ms = ?, revoked_reason = ?"
                    " WHERE grant_id = ? AND revoked_at_ms IS NULL",
                    (at_ms, reason, grant_id),
                ).rowcount
                == 1
            )

    def forget_spent_tokens(self, grant_id: str, issued_by: str, expired_before_ms: int) -> int:
        with self._tx() as db:
            done = db.execute(
                "DELETE FROM issued_bindings WHERE session = ? AND issued_by = ? AND expires_at_ms < ?"
                " AND NOT EXISTS (SELECT 1 FROM revocations AS r WHERE r.token_id = issued_bindings.token_id)",
                (grant_id, issued_by, expired_before_ms),
            )
            return int(done.rowcount)

    def live_bindings(self, grant_id: str, now_ms: int) -> list[str]:
        with self._tx() as db:
            rows = db.execute(
                "SELECT token_id FROM issued_bindings WHERE session = ? AND expires_at_ms > ? ORDER BY token_id",
                (grant_id, now_ms),
            ).fetchall()
        return [str(row[0]) for row in rows]

    # -- codes and refresh tokens ------------------------------------------------------------------
    def add_code(self, row: CodeRow) -> None:
        values = (
            row.code_digest,
            row.grant_id,
            row.redirect_uri,
            bool(row.redirect_uri_explicit),
            row.code_challenge,
            row.expires_at_ms,
            row.used_at_ms,
        )
        with self._tx() as db:
            db.execute(f"INSERT INTO oauth_codes ({_CODE}) VALUES ({_marks(_CODE)})", values)  # noqa: S608

    def take_code(self, code_digest: str, now_ms: int) -> tuple[CodeRow, bool] | None:
        with self._tx() as db:
            first = (
                db.execute(
                    "UPDATE oauth_codes SET used_at_ms = ? WHERE code_digest = ? AND used_at_ms IS NULL",
                    (now_ms, code_digest),
                ).rowcount
                == 1
            )
            found = db.execute(f"SELECT {_CODE} FROM oauth_codes WHERE code_digest = ?", (code_digest,)).fetchone()  # noqa: S608
        return None if found is None else (_code(found), first)

    def add_refresh(self, row: RefreshRow) -> None:
        values = (row.token_digest, row.grant_id, row.issued_at_ms, row.expires_at_ms, row.used_at_ms)
        with self._tx() as db:
            db.execute(f"INSERT INTO oauth_refresh_tokens ({_REFRESH}) VALUES ({_marks(_REFRESH)})", values)  # noqa: S608

    def refresh_token(self, token_digest: str) -> RefreshRow | None:
        with self._tx() as db:
            found = db.execute(
                f"SELECT {_REFRESH} FROM oauth_refresh_tokens WHERE token_digest = ?",  # noqa: S608
                (token_digest,),
            ).fetchone()
        return None if found is None else _refresh(found)

    def take_refresh(self, token_digest: str, now_ms: int) -> tuple[RefreshRow, bool] | None:
        with self._tx() as db:
            first = (
                db.execute(
                    "UPDATE oauth_refresh_tokens SET used_at_ms = ? WHERE token_digest = ? AND used_at_ms IS NULL",
                    (now_ms, token_digest),
                ).rowcount
                == 1
            )
            found = db.execute(
                f"SELECT {_REFRESH} FROM oauth_refresh_tokens WHERE token_digest = ?",  # noqa: S608
                (token_digest,),
            ).fetchone()
        return None if found is None else (_refresh(found), first)

    # -- browser sessions --------------------------------------------------------------------------
    def add_session(self, row: SessionRow) -> None:
        values = (row.session_digest, row.identity, row.created_at_ms, row.expires_at_ms, row.upstream_token)
        with self._tx() as db:
            db.execute(f"INSERT INTO sign_in_sessions ({_SESSION}) VALUES ({_marks(_SESSION)})", values)  # noqa: S608

    def session(self, session_digest: str, now_ms: int) -> SessionRow | None:
        with self._tx() as db:
            found = db.execute(
                f"SELECT {_SESSION} FROM sign_in_sessions WHERE session_digest = ? AND expires_at_ms > ?",  # noqa: S608
                (session_digest, now_ms),
            ).fetchone()
        if found is None:
            return None
        upstream = None if found[4] is None else str(found[4])
        return SessionRow(str(found[0]), str(found[1]), int(found[2]), int(found[3]), upstream)

    def end_session(self, session_digest: str) -> None:
        with self._tx() as db:
            db.execute("DELETE FROM sign_in_sessions WHERE session_digest = ?", (session_digest,))
