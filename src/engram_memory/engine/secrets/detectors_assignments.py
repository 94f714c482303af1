"""Detectors that know a secret by what names it: headers, URL userinfo, connection strings, assignments.

Each takes the text and its lower-cased twin and yields the spans whose value is concrete enough to be a secret.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import re
from collections.abc import Iterator

from engram_memory.engine.secrets.detectors_keys import _API_TOKEN_RE, _scheme_start
from engram_memory.engine.secrets.judgement import (
    _DIGITS_RE,
    _IDENT_RE,
    _TOKEN_CHARS,
    _UPPER_WORD_RE,
    _WORD_CHARS,
    Span,
    _credential_like,
    _is_concrete_value,
    _is_placeholder,
    _is_reference,
    _is_wordish,
    _looks_random,
    _masked,
    _preceded_by,
    _unquote,
    _words,
)

# --- bearer_token ---------------------------------------------------------------------------------

# These run on the lower-cased text (values are read back from the original), one pattern per
# keyword so each opens with a literal the engine can jump to.
_BEARER_RE = re.compile(r"bearer[ \t]{1,4}(?P<bearer>[a-z0-9._~+/-]{16,4096}={0,2})")
_AUTHORIZATION_RE = re.compile(
    r"""authorization["']?[ \t]{0,4}[:=][ \t]{0,4}["']?"""
    r"(?:(?P<scheme>basic|bearer|token|digest|negotiate|ntlm|bot|apikey|sso-key)[ \t]{1,4})?"
    r"(?P<auth>[a-z0-9._~+/:=-]{8,4096})"
)
_KEY_HEADER_RE = re.compile(
    r"(?:x-api-key|x-auth-token|x-access-token|private-token|x-vault-token|api-key|x-goog-api-key"
    r"""|ocp-apim-subscription-key|x-apikey)["']?[ \t]{0,4}:[ \t]{0,4}["']?(?P<header>[a-z0-9._~+/=-]{16,4096})"""
)
_TOKEN_HEX_RE = re.compile(r"token[ \t]{1,4}(?P<hex>[0-9a-f]{40})(?![a-z0-9])")


def _basic_credentials(token: str) -> bool:
    try:
        decoded = base64.b64decode(token + "=" * (-len(token) % 4), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return False
    user, colon, password = decoded.partition(":")
    return bool(colon and user and password and decoded.isprintable())


def _find_bearer_tokens(text: str, folded: str) -> Iterator[Span]:
    def value(match: re.Match[str], group: str) -> str:
        return text[match.start(group) : match.end(group)]

    def starts_token(match: re.Match[str]) -> bool:
        start = match.start()
        return not _preceded_by(text, start, _TOKEN_CHARS) or folded[max(0, start - 6) : start] == "proxy-"

    for match in _BEARER_RE.finditer(folded):
        if starts_token(match) and _credential_like(value(match, "bearer")):
            yield match.span()
    for match in _AUTHORIZATION_RE.finditer(folded):
        scheme, auth = match.group("scheme") or "", value(match, "auth")
        if not starts_token(match):
            continue
        if (scheme == "basic" and _basic_credentials(auth)) or ((scheme or len(auth) >= 16) and _credential_like(auth)):
            yield match.span()
    for match in _KEY_HEADER_RE.finditer(folded):
        if starts_token(match) and _credential_like(value(match, "header")):
            yield match.span()
    for match in _TOKEN_HEX_RE.finditer(folded):
        if starts_token(match) and not _masked(match.group("hex")):
            yield match.span()


# --- url_credentials ------------------------------------------------------------------------------

# Anchored on the literal "://" and then walked back over the scheme, so the scan never starts a
# scheme match at every position of a long word.
_URL_USERINFO_RE = re.compile(
    r"://(?P<user>[^\s:/?#@\"'<>`]{0,256})(?::(?P<password>[^\s/\"'<>`]{1,256}))?@(?=[A-Za-z0-9\[])"
)


def _find_url_credentials(text: str, folded: str) -> Iterator[Span]:
    for match in _URL_USERINFO_RE.finditer(text):
        start = _scheme_start(text, match.start())
        if start is None:
            continue
        user, password = match.group("user"), match.group("password")
        if password is not None:
            # "guest:guest" style documented defaults and "user:password" templates are not secrets.
            if len(password) < 3 or password == user or _is_placeholder(password):
                continue
        elif not _looks_random(user, min_length=20) and not _API_TOKEN_RE.fullmatch(user):
            continue  # ssh://git@host, https://user@host: a name, not a credential
        yield start, match.end()


# --- connection_string ----------------------------------------------------------------------------

# Both run on the lower-cased text; the value is read back from the original.
_CONN_PASSWORD_RE = re.compile(
    r"p(?:assword|wd)="
    r"(?P<value>\{[^}\n]{1,256}\}|\"[^\"\n]{1,256}\"|'[^'\n]{1,256}'|[^;&\s\"',)\]}>]{1,256})"
)
_CONN_CONTEXT_RE = re.compile(
    r"server=|data source=|host=|hostaddr=|hostname=|address=|addr=|user id=|uid=|user=|username="
    r"|database=|initial catalog=|dbname=|port=|driver=|provider=|dsn=|sslmode=|jdbc:|odbc:"
)
_CONTEXT_WINDOW = 512


def _find_connection_strings(text: str, folded: str) -> Iterator[Span]:
    """A password key counts as a connection string only beside the other keys of one."""
    context: list[int] | None = None
    for match in _CONN_PASSWORD_RE.finditer(folded):
        if _preceded_by(text, match.start(), _WORD_CHARS):
            continue
        value = text[match.start("value") : match.end("value")]
        if value.startswith("{") and value.endswith("}"):  # ODBC quoting, or a {template} slot
            inner = value[1:-1]
            slot = _IDENT_RE.fullmatch(inner) is not None and _is_wordish(inner)
            if slot or not _is_concrete_value(f'"{inner}"', min_length=3):
                continue
        elif not _is_concrete_value(value, min_length=3):
            continue
        if context is None:  # found once per text, so many candidates cost no rescans
            context = [
                m.start() for m in _CONN_CONTEXT_RE.finditer(folded) if not _preceded_by(text, m.start(), _WORD_CHARS)
            ]
        index = bisect.bisect_left(context, match.start() - _CONTEXT_WINDOW)
        if index < len(context) and context[index] <= match.end() + _CONTEXT_WINDOW:
            yield match.span()


# --- env_assignment -------------------------------------------------------------------------------

# This one keeps its leading look-behind: without it, a megabyte of capitals would be re-read from
# every position.
_ENV_RE = re.compile(
    r"(?<![A-Za-z0-9_$.-])(?:export[ \t]{1,4})?(?P<name>[A-Z][A-Z0-9_]{1,127})="
    r"(?P<value>\"[^\"\n]{0,4096}\"|'[^'\n]{0,4096}'|[^\s\"'`]{0,4096})"
)
_ENV_LINE_RE = re.compile(
    r"^[ \t]{0,8}(?:export[ \t]{1,4})?[A-Z][A-Z0-9_]{1,127}="
    r"(?:\"[^\"\n]{0,4096}\"|'[^'\n]{0,4096}'|[^\s\"'`#]{0,4096}(?<![,;(]))"  # code ends in , ; (
    r"(?:[ \t]{1,8}#[^\n]{0,4096})?[ \t]{0,8}\r?$",
    re.MULTILINE,
)
_ENV_GAP_RE = re.compile(r"(?:\r?\n[ \t]{0,8}#[^\n]{0,4096}){0,64}\r?\n")  # comments between lines
_SENSITIVE_PARTS = _words(
    """
    KEY KEYS SECRET SECRETS TOKEN TOKENS PASSWORD PASSWORDS PASSWD PWD PASS PASSPHRASE
    CREDENTIAL CREDENTIALS CREDS AUTH PRIVATE DSN CONN APIKEY SECRETKEY ACCESSKEY PRIVATEKEY
    COOKIE SALT PEPPER
    """
)
_SENSITIVE_SUBSTRINGS = ("PASSWORD", "PASSWD", "SECRET", "CREDENTIAL", "APIKEY", "PASSPHRASE")
# When the name ends in one of these, it configures how a secret is handled, not the secret itself.
_NEUTRAL_SUFFIXES = _words(
    """
    TYPE MODE PROVIDER ALGORITHM ALG SIZE BITS LENGTH LEN TTL EXPIRY EXPIRES LIFETIME TIMEOUT
    FILE PATH DIR ENABLED DISABLED ENABLE DISABLE REQUIRED NAME ID URL URI ENDPOINT ISSUER
    AUDIENCE HEADER FORMAT VERSION ROTATION POLICY BACKEND STORE VAULT COUNT MIN MAX LIMIT
    PREFIX SCOPE SCOPES METHOD STRATEGY LOCATION REGION HOST PORT USER USERNAME FIELD
    PARALLELISM HASH HASHER HASHING ENCODING CIPHER CHECK VALIDATION RESET REGEX PATTERN
    COMPLEXITY HISTORY RETRIES ATTEMPTS DELAY INTERVAL CACHE STORAGE SOURCE KIND SERVICE SERVER
    ROLE GROUP REALM DOMAIN ALIAS LABEL ARN USAGE PURPOSE SCHEME DAYS HOURS MINUTES SECONDS MS
    SEC
    """
)


def _sensitive_part(part: str) -> bool:
    return part in _SENSITIVE_PARTS or any(word in part for word in _SENSITIVE_SUBSTRINGS)


def _sensitive_env_name(name: str) -> bool:
    """DB_PASSWORD and AWS_SECRET_ACCESS_KEY are secrets; AUTH_PROVIDER and TOKEN_TTL configure one."""
    if "DATABASE_URL" in name or "CONNECTION_STRING" in name:
        return True
    parts = [part for part in name.split("_") if part]
    if not parts:
        return False
    if _sensitive_part(parts[-1]):
        return True
    return parts[-1] not in _NEUTRAL_SUFFIXES and any(_sensitive_part(part) for part in parts)


def _env_value_is_secret(value: str) -> bool:
    inner = _unquote(value).strip().rstrip(".,;:!?)")
    if len(inner) < 3 or _is_placeholder(inner) or _DIGITS_RE.fullmatch(inner):
        return False
    if _UPPER_WORD_RE.fullmatch(inner):  # KEY=VALUE, LOG_LEVEL=DEBUG: a metavariable or a mode
        return False
    return "@" in inner or not _is_reference(inner)


def _find_env_assignments(text: str, folded: str) -> Iterator[Span]:
    for match in _ENV_RE.finditer(text):
        value = match.group("value")
        named = _sensitive_env_name(match.group("name")) and _env_value_is_secret(value)
        if named or (len(value) >= 20 and _looks_random(_unquote(value), min_length=20)):
            yield match.span()
    yield from _find_env_blocks(text)


def _find_env_blocks(text: str) -> Iterator[Span]:
    """Two or more adjacent .env lines (comments may sit between them) are a pasted .env file."""
    block: list[int] = []  # start of the block, end of its last line, line count
    for line in _ENV_LINE_RE.finditer(text):
        adjacent = bool(block) and (
            line.start() == block[1] + 1 or _ENV_GAP_RE.fullmatch(text, block[1], line.start()) is not None
        )
        if adjacent:
            block[1:] = [line.end(), block[2] + 1]
            continue
        if block and block[2] >= 2:
            yield block[0], block[1]
        block = [line.start(), line.end(), 1]
    if block and block[2] >= 2:
        yield block[0], block[1]


# --- session_cookie -------------------------------------------------------------------------------

# Both run on the lower-cased text. The header is anchored on "cookie" ("set-" is looked up in
# Python); the session id on the session word, with the rest of the cookie name walked back.
_COOKIE_HEADER_RE = re.compile(
    r"cookie[\"']?[ \t]{0,4}:[ \t]{0,4}[\"']?"
    r"(?P<name>[a-z0-9_.!#$%&*+^|~-]{1,128})=(?P<value>[^\s;,\"'\\]{1,4096})"
)
_SESSION_ID_RE = re.compile(r"s(?:ess(?:ion)?(?:[_-]?id)?|id)=[\"']?(?P<value>[a-z0-9%._:/+=-]{16,4096})")
_COOKIE_NAME_CHARS = _WORD_CHARS | {".", "-"}


def _session_name_start(text: str, start: int) -> int | None:
    """Accept PHPSESSID, JSESSIONID, connect.sid, _app_session, ASP.NET_SessionId, but not 'grasid'."""
    name_start = start
    while name_start > 0 and start - name_start < 40 and text[name_start - 1] in _COOKIE_NAME_CHARS:
        name_start -= 1
    prefix = text[name_start:start].lower()
    if not prefix or prefix[-1] in "_.-" or prefix in {"php", "j"}:
        return name_start
    return None


def _find_session_cookies(text: str, folded: str) -> Iterator[Span]:
    for match in _COOKIE_HEADER_RE.finditer(folded):
        start = match.start()
        if folded[max(0, start - 4) : start] == "set-":
            start -= 4
        value = text[match.start("value") : match.end("value")]
        if _preceded_by(text, start, _TOKEN_CHARS) or len(value) < 8:
            continue
        if not _is_placeholder(value) and _credential_like(value):
            yield start, match.end()
    for match in _SESSION_ID_RE.finditer(folded):
        name_start = _session_name_start(text, match.start())
        value = text[match.start("value") : match.end("value")]
        if name_start is not None and not _is_placeholder(value) and _credential_like(value):
            yield name_start, match.end()
