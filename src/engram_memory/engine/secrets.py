"""Refuse secrets at capture: a memory store is the wrong place for credentials (SPEC section 10).

Shape-based and conservative on purpose: a hit silently rejects a memory, so ordinary engineering
prose, identifiers, digests and ids must pass; only credential shapes and clearly random tokens stop.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import itertools
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

__all__ = [
    "CATEGORIES",
    "DEFAULT_CATEGORIES",
    "SecretFinding",
    "scan_text",
    "scan_value",
    "secret_categories",
]

CATEGORIES: tuple[str, ...] = (
    "private_key",
    "cloud_key",
    "api_token",
    "jwt",
    "bearer_token",
    "url_credentials",
    "connection_string",
    "password_assignment",
    "env_assignment",
    "session_cookie",
    "high_entropy",
    "personal_data",
)

# Personal data is a host policy choice (SPEC section 10), so it is never on unless asked for.
DEFAULT_CATEGORIES: frozenset[str] = frozenset(CATEGORIES) - {"personal_data"}


@dataclass(frozen=True, slots=True)
class SecretFinding:
    """One hit, located precisely enough for a reviewer; it never carries the matched text itself."""

    category: str
    path: str
    start: int
    end: int


Span = tuple[int, int]

# Every pattern below either starts with a literal or is guarded by a look-behind, and every
# quantifier is bounded, so a failed attempt costs a bounded amount of work per position and a
# 1 MiB adversarial string scans in linear time (no ReDoS). Keep it that way when editing.

# --- shared value judgement ---------------------------------------------------------------------

_PLACEHOLDER_WORDS = frozenset(
    {
        "password",
        "passwd",
        "pass",
        "pwd",
        "secret",
        "token",
        "apikey",
        "api_key",
        "api-key",
        "key",
        "changeme",
        "change_me",
        "change-me",
        "changeit",
        "redacted",
        "hidden",
        "masked",
        "removed",
        "omitted",
        "placeholder",
        "example",
        "sample",
        "dummy",
        "fake",
        "test",
        "todo",
        "tbd",
        "none",
        "null",
        "nil",
        "undefined",
        "empty",
        "true",
        "false",
        "yes",
        "no",
        "on",
        "off",
        "n/a",
        "na",
        "required",
        "optional",
        "unset",
        "notset",
        "not_set",
        "not-set",
        "foo",
        "bar",
        "baz",
        "foobar",
        "value",
        "string",
        "str",
    }
)
_PLACEHOLDER_RE = re.compile(
    r"""
    <[^<>\n]{0,80}>                                # <redacted>, <your-token>
    | \[[^\[\]\n]{0,80}\]                          # [REDACTED]
    | \$\{\{?[^{}\n]{0,120}\}\}?                   # ${VAR}, ${{ secrets.X }}
    | \{\{[^{}\n]{0,120}\}\}                       # {{ vault_password }}
    | \{[A-Za-z_][A-Za-z0-9_.]{0,80}\}             # {db_password}
    | \$[A-Za-z_][A-Za-z0-9_]{0,80}                # $DB_PASSWORD
    | \$\(.{0,256}                                  # $(cat key.txt)
    | (?:\$\{|\{\{|<|%\().{0,256}                   # a template cut short by whitespace
    | %\(?[A-Za-z_]{0,40}\)?s                      # %s, %(password)s
    | %[A-Za-z_][A-Za-z0-9_]{0,80}%                # %DB_PASSWORD%
    | [*xX.\u2022#_-]{1,256}                       # ****, xxxx, ....
    | \u2026
    | (?i:(?:my|your|the|some|a|an|new|old|db|user)[_ -]?
         (?:secret[_ -]?)?(?:password|passwd|pass|pwd|secret|token|api[_ -]?key|key)
         (?:[_ -]?(?:here|goes[_ -]?here|value))?)
    | (?i:(?:insert|enter|put|add)[_ -][A-Za-z0-9_ -]{0,60})
    """,
    re.VERBOSE,
)
# A value that names where the secret lives (a variable, attribute, call, file) is not the secret.
_IDENT = r"[A-Za-z_][A-Za-z0-9_]{0,120}"
_IDENT_RE = re.compile(_IDENT)
_DOTTED_RE = re.compile(rf"{_IDENT}(?:\.{_IDENT}){{1,12}}")
_CALL_RE = re.compile(rf"{_IDENT}(?:\.{_IDENT}){{0,12}}[(\[].{{0,256}}", re.DOTALL)
_PATH_OR_URL_RE = re.compile(
    r"(?:~|\.{1,2})?/[^\s]{0,512}"  # /run/secrets/db, ./key.pem, ~/.aws/credentials
    r"|[A-Za-z]:\\[^\s]{0,512}"  # C:\keys\app.pfx
    r"|[A-Za-z][A-Za-z0-9+.-]{1,31}://[^\s@]{0,512}"  # a URL that carries no credentials
)
_UPPER_WORD_RE = re.compile(r"[A-Z]{1,64}(?:_[A-Z0-9]{1,63}){0,31}")
_UPPER_SNAKE_RE = re.compile(r"_{0,2}[A-Z][A-Z0-9]{0,63}(?:_[A-Z0-9]{1,63}){1,31}")
_TEMPLATE_FIELD_RE = re.compile(r"\{[A-Za-z0-9_.!:\[\]]{0,60}\}|%[sd]|%\([A-Za-z_]{1,40}\)s|\$\{")
_WORD = r"(?:(?:[a-z]{1,64}|[A-Z][a-z]{0,63}|[A-Z]{1,64})[0-9]{0,8}|[0-9]{1,8})"
_MULTI_WORD_RE = re.compile(rf"{_WORD}(?:[_-]{_WORD}){{1,31}}")
_DIGITS_RE = re.compile(r"[0-9]{1,256}")
_WORD_RUN_RE = re.compile(r"[A-Z][a-z]{2,64}|[a-z]{3,64}|[A-Z]{3,64}(?![a-z])")
_RANDOMNESS_THRESHOLD = -0.2
_LETTERS_RE = re.compile(r"[A-Za-z]{1,256}")


def _is_reference(value: str) -> bool:
    """Whether a value names a variable, attribute, call, file or plain URL instead of holding a secret."""
    if _CALL_RE.fullmatch(value) or _PATH_OR_URL_RE.fullmatch(value):
        return True
    if _DOTTED_RE.fullmatch(value):
        return all(len(part) <= 3 or part.islower() or part.isupper() or _is_wordish(part) for part in value.split("."))
    return False


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'`":
        return value[1:-1]
    return value


def _is_placeholder(value: str) -> bool:
    """Obvious placeholders and variable references are documentation, not credentials."""
    value = _unquote(value.strip())
    if not value:
        return True
    lowered = value.lower()
    if lowered in _PLACEHOLDER_WORDS:
        return True
    if len(set(value)) <= 2:  # "aaaaaaaa", "0000", "xxxx"
        return True
    return _PLACEHOLDER_RE.fullmatch(value) is not None


def _char_class(char: str) -> int:
    return 1 if char.isupper() else 2 if char.islower() else 3 if char.isdigit() else 0


def _randomness(token: str) -> float:
    """How much a token reads like generated noise rather than words; above -0.2 means noise.

    Two measured signals: generated keys flip between upper, lower and digit on most adjacent
    pairs (about 0.6 of them) while identifiers flip only at word boundaries (under 0.45); and
    identifiers are mostly covered by word-shaped runs (over 0.65) while random text is not (under
    0.6). Their difference separated every identifier in the Python standard library and the
    installed packages (at most -0.32) from 98% of random base64/base62 tokens.
    """
    flips = pairs = 0
    for left, right in itertools.pairwise(token):
        a, b = _char_class(left), _char_class(right)
        if a and b:
            pairs += 1
            flips += a != b
    alnum = sum(1 for char in token if char.isalnum())
    if not alnum:
        return -1.0
    covered = sum(len(word) for word in _WORD_RUN_RE.findall(token))
    return (flips / pairs if pairs else 0.0) - covered / alnum


def _is_wordish(token: str) -> bool:
    """Identifiers built from words (snake, kebab, camel, paths) rather than noise."""
    return _randomness(token) < _RANDOMNESS_THRESHOLD


def _is_concrete_value(value: str, *, min_length: int) -> bool:
    """Whether an assigned value looks like a real credential rather than prose, a word or a reference.

    Quoted values are deliberate literals; unquoted ones must not read as a word or an identifier.
    """
    quoted = len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'`"
    inner = _unquote(value).strip()
    if not quoted:
        inner = inner.rstrip(".,;:!?")  # "the password is missing." ends a sentence
    if len("".join(inner.split())) < min_length or _is_placeholder(inner):
        return False
    if _TEMPLATE_FIELD_RE.search(inner):  # '{0}:{1}', '%s', '${PASSWORD}': filled in elsewhere
        return False
    if quoted:
        return _quoted_literal_is_secret(inner)
    return not _reads_as_name(inner)


def _quoted_literal_is_secret(inner: str) -> bool:
    """A quoted sentence ("rotated every quarter") is prose; a quoted compound name is a reference."""
    if " " in inner:
        return not all(_LETTERS_RE.fullmatch(word) for word in inner.split())
    compound = _IDENT_RE.fullmatch(inner) and len(_WORD_RUN_RE.findall(inner)) >= 2
    return not (compound and _is_wordish(inner)) and not _DOTTED_RE.fullmatch(inner)


def _reads_as_name(inner: str) -> bool:
    """An unquoted word, identifier, reference, number or bit of markup rather than a secret."""
    return bool(
        inner[0] in ":({[<"
        or _is_reference(inner)
        or _UPPER_SNAKE_RE.fullmatch(inner)
        or _DIGITS_RE.fullmatch(inner)  # lengths, timeouts, counts
        or (_LETTERS_RE.fullmatch(inner) and _is_wordish(inner))  # a plain word or camelCase name
        or _MULTI_WORD_RE.fullmatch(inner)  # "min-length-12", "not_configured"
    )


def _shannon_entropy(token: str) -> float:
    counts = Counter(token)
    total = len(token)
    return -sum(n / total * math.log2(n / total) for n in counts.values())


def _char_classes(token: str) -> int:
    upper = any(c.isupper() for c in token)
    lower = any(c.islower() for c in token)
    digit = any(c.isdigit() for c in token)
    symbol = any(not c.isalnum() for c in token)
    return upper + lower + digit + symbol


def _looks_random(token: str, *, min_length: int) -> bool:
    """Entropy plus mixed character classes plus not-made-of-words: the shape of generated keys."""
    if len(token) < min_length or _char_classes(token) < 3:
        return False
    if _shannon_entropy(token) < 4.0:
        return False
    if _is_excluded_token(token):
        return False
    return not _is_wordish(token)


# Shapes that are high-entropy by nature but are ids or digests, never credentials.
_EXCLUDED_TOKEN_RE = re.compile(
    r"""
    (?:0x)?[0-9a-fA-F]{1,4096}                                        # hex: git SHAs, digests
    | [0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}  # UUID
    | [a-z][a-z0-9]{0,15}_[a-z2-7]{8,4096}                           # base32 ids: mem_..., cand_...
    | (?:sha|SHA)(?:1|224|256|384|512)[-_=].{0,4096}                 # SRI / digest prefixes
    | [0-9]{1,4096}
    """,
    re.VERBOSE | re.DOTALL,
)


def _is_excluded_token(token: str) -> bool:
    if _EXCLUDED_TOKEN_RE.fullmatch(token):
        return True
    if "/" in token:  # a path whose every segment is made of words
        segments = [s for s in token.split("/") if s]
        return bool(segments) and all(
            _is_wordish(s) or len(s) <= 3 or _EXCLUDED_TOKEN_RE.fullmatch(s) for s in segments
        )
    return False


def _masked(body: str) -> bool:
    """Key-shaped documentation such as ghp_xxxx... or AKIAXXXXXXXXXXXXXXXX is not a key."""
    return len(set(body)) <= 4


# --- private_key ----------------------------------------------------------------------------------

_PEM_BEGIN_RE = re.compile(r"-{4,5} ?BEGIN (?:[A-Z0-9]{1,16} ){0,3}PRIVATE KEY(?: BLOCK)? ?-{4,5}")
_PEM_END_RE = re.compile(r"-{4,5} ?END (?:[A-Z0-9]{1,16} ){0,3}PRIVATE KEY(?: BLOCK)? ?-{4,5}")
_OTHER_PRIVATE_KEY_RE = re.compile(
    r"PuTTY-User-Key-File-[0-9]{1,2}: ?[a-z0-9-]{3,40}"
    r"|AGE-SECRET-KEY-1[0-9A-Z]{58}"
)


def _find_private_keys(text: str) -> Iterator[Span]:
    """The header alone is enough; when the footer follows, the whole block is the span."""
    ends = [(m.start(), m.end()) for m in _PEM_END_RE.finditer(text)]
    end_starts = [start for start, _ in ends]
    used: set[int] = set()
    for match in _PEM_BEGIN_RE.finditer(text):
        index = bisect.bisect_left(end_starts, match.end())
        if index < len(ends):
            used.add(index)
            yield match.start(), ends[index][1]
        else:
            yield match.span()
    for index, span in enumerate(ends):
        if index not in used:
            yield span
    for match in _OTHER_PRIVATE_KEY_RE.finditer(text):
        yield match.span()


# --- cloud_key ------------------------------------------------------------------------------------

_CLOUD_KEY_RE = re.compile(
    r"""
    (?<![A-Za-z0-9])(?P<aws>(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16})(?![A-Za-z0-9])
    | (?i:aws_?secret_?(?:access_?)?key)["']?[ \t]{0,4}(?::=|=>|[:=])[ \t]{0,4}["']?
      [A-Za-z0-9/+]{40}(?![A-Za-z0-9/+])
    | (?<![A-Za-z0-9_-])(?P<gcp>AIza[0-9A-Za-z_-]{35})(?![A-Za-z0-9_-])
    | (?<![A-Za-z0-9_-])GOCSPX-[A-Za-z0-9_-]{28}(?![A-Za-z0-9_-])
    | (?i:AccountKey|SharedAccessKey)=[A-Za-z0-9+/]{40,128}={0,2}
    | (?i:X-Amz-Signature|X-Goog-Signature)=[0-9a-f]{64}
    """,
    re.VERBOSE,
)


def _find_cloud_keys(text: str) -> Iterator[Span]:
    for match in _CLOUD_KEY_RE.finditer(text):
        body = match.group("aws") or match.group("gcp")
        if body is not None and _masked(body[4:]):
            continue
        yield match.span()


# --- api_token ------------------------------------------------------------------------------------

_API_TOKEN_RE = re.compile(
    r"""
    (?<![A-Za-z0-9_-])
    (?:
      (?P<github>gh[pousr]_)(?P<github_body>[A-Za-z0-9]{36,255})
      | github_pat_(?P<ghpat_body>[A-Za-z0-9_]{22,255})
      | gl(?:pat|ptt|dt|rt)-(?P<gitlab_body>[A-Za-z0-9_-]{20,64})
      | xox[abprs]-(?P<slack_body>[A-Za-z0-9-]{10,250})
      | xapp-[0-9]-[A-Z0-9]{8,16}-[0-9]{8,16}-[a-z0-9]{32,80}
      | (?:sk|rk)_(?:live|test)_(?P<stripe_body>[A-Za-z0-9]{10,247})
      | whsec_[A-Za-z0-9]{24,64}
      | sk-ant-(?P<anthropic_body>[A-Za-z0-9_-]{20,256})
      | sk-(?:proj-|svcacct-|admin-)?(?P<openai_body>[A-Za-z0-9_-]{20,256})
      | npm_(?P<npm_body>[A-Za-z0-9]{36})
      | pypi-Ag[A-Za-z0-9_-]{50,1000}
      | SK[0-9a-f]{32}
      | SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}
      | hf_(?P<hf_body>[A-Za-z0-9]{34,40})
      | shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}
      | ya29\.[A-Za-z0-9_-]{30,2048}
      | dop_v1_[a-f0-9]{64}
      | dapi[a-f0-9]{32}
      | hvs\.[A-Za-z0-9_-]{24,256}
      | glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}
      | lin_api_[A-Za-z0-9]{40}
      | PMAK-[a-f0-9]{24}-[a-f0-9]{34}
      | sq0(?:atp|csp)-[A-Za-z0-9_-]{22,60}
      | dp\.pt\.[A-Za-z0-9]{40,64}
      | key-[0-9a-f]{32}
    )
    (?![A-Za-z0-9_-])
    | (?<![0-9])[0-9]{8,10}:AA[A-Za-z0-9_-]{33}(?![A-Za-z0-9_-])
    | hooks\.slack\.com/(?:services|workflows)/T[A-Z0-9]{6,12}/[AB][A-Z0-9]{6,12}/[A-Za-z0-9]{20,40}
    """,
    re.VERBOSE,
)
_BODY_GROUPS = (
    "github_body",
    "ghpat_body",
    "gitlab_body",
    "slack_body",
    "stripe_body",
    "anthropic_body",
    "npm_body",
    "hf_body",
)


def _find_api_tokens(text: str) -> Iterator[Span]:
    for match in _API_TOKEN_RE.finditer(text):
        body = next((match.group(g) for g in _BODY_GROUPS if match.group(g) is not None), None)
        if body is not None and _masked(body):
            continue
        openai = match.group("openai_body")
        # "sk-" also starts ordinary hyphenated words; real keys always mix case and digits.
        if openai is not None and (_masked(openai) or _char_classes(openai.replace("-", "")) < 3):
            continue
        yield match.span()


# --- jwt ------------------------------------------------------------------------------------------

_JWT_RE = re.compile(
    r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{5,8192}\.ey[A-Za-z0-9_-]{5,16384}\.[A-Za-z0-9_-]{0,8192}"
    r"(?:\.[A-Za-z0-9_-]{0,16384}\.[A-Za-z0-9_-]{0,8192})?"  # the two extra parts of a JWE
)


def _find_jwts(text: str) -> Iterator[Span]:
    for match in _JWT_RE.finditer(text):
        yield match.span()


# --- bearer_token ---------------------------------------------------------------------------------

_BEARER_RE = re.compile(
    r"""
    (?<![A-Za-z0-9_-])(?i:bearer)[ \t]{1,4}(?P<bearer>[A-Za-z0-9._~+/-]{16,4096}={0,2})
    | (?<![A-Za-z0-9_-])(?i:authorization|proxy-authorization)["']?[ \t]{0,4}[:=][ \t]{0,4}["']?
      (?:(?P<scheme>(?i:basic|bearer|token|digest|negotiate|ntlm|bot|apikey|sso-key))[ \t]{1,4})?
      (?P<auth>[A-Za-z0-9._~+/:=-]{8,4096})
    | (?<![A-Za-z0-9_-])(?i:x-api-key|x-auth-token|x-access-token|private-token|x-vault-token
      |api-key|x-goog-api-key|ocp-apim-subscription-key|x-apikey)["']?[ \t]{0,4}:[ \t]{0,4}["']?
      (?P<header>[A-Za-z0-9._~+/=-]{16,4096})
    | (?<![A-Za-z0-9_-])(?i:token)[ \t]{1,4}(?P<hex>[0-9a-f]{40})(?![A-Za-z0-9])
    """,
    re.VERBOSE,
)


def _credential_like(token: str) -> bool:
    """A header value counts when it is not prose, a placeholder, or a variable name."""
    if _is_placeholder(token) or _UPPER_SNAKE_RE.fullmatch(token):
        return False
    if _MULTI_WORD_RE.fullmatch(token) or (_LETTERS_RE.fullmatch(token) and _is_wordish(token)):
        return False
    return not _is_reference(token)


def _basic_credentials(token: str) -> bool:
    try:
        decoded = base64.b64decode(token + "=" * (-len(token) % 4), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return False
    user, colon, password = decoded.partition(":")
    return bool(colon and user and password and decoded.isprintable())


def _find_bearer_tokens(text: str) -> Iterator[Span]:
    for match in _BEARER_RE.finditer(text):
        if match.group("hex") is not None:
            if not _masked(match.group("hex")):
                yield match.span()
            continue
        if match.group("auth") is not None:
            scheme = (match.group("scheme") or "").lower()
            auth = match.group("auth")
            basic = scheme == "basic" and _basic_credentials(auth)
            if basic or ((scheme or len(auth) >= 16) and _credential_like(auth)):
                yield match.span()
            continue
        token = match.group("bearer") or match.group("header")
        if token is not None and _credential_like(token):
            yield match.span()


# --- url_credentials ------------------------------------------------------------------------------

# Anchored on the literal "://" and then walked back over the scheme, so the scan never starts a
# scheme match at every position of a long word.
_URL_USERINFO_RE = re.compile(
    r"://(?P<user>[^\s:/?#@\"'<>`]{0,256})(?::(?P<password>[^\s/?#@\"'<>`]{1,256}))?@(?=[A-Za-z0-9\[])"
)
_SCHEME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+.-")


def _scheme_start(text: str, colon: int) -> int | None:
    start = colon
    while start > 0 and colon - start < 32 and text[start - 1] in _SCHEME_CHARS:
        start -= 1
    while start < colon and not text[start].isalpha():
        start += 1
    return start if colon - start >= 2 else None


def _find_url_credentials(text: str) -> Iterator[Span]:
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

_CONN_PASSWORD_RE = re.compile(
    r"(?<![A-Za-z0-9_])(?i:password|pwd)="
    r"(?P<value>\{[^}\n]{1,256}\}|\"[^\"\n]{1,256}\"|'[^'\n]{1,256}'|[^;&\s\"',)\]}>]{1,256})"
)
_CONN_CONTEXT_RE = re.compile(
    r"(?<![A-Za-z0-9_])(?i:server|data source|host|hostaddr|hostname|address|addr|user id|uid|user"
    r"|username|database|initial catalog|dbname|port|driver|provider|dsn|sslmode)="
    r"|(?i:jdbc|odbc):"
)
_CONTEXT_WINDOW = 512


def _find_connection_strings(text: str) -> Iterator[Span]:
    """A password key counts as a connection string only beside the other keys of one."""
    context: list[int] | None = None
    for match in _CONN_PASSWORD_RE.finditer(text):
        value = match.group("value")
        if value.startswith("{") and value.endswith("}"):  # ODBC quoting, or a {template} slot
            inner = value[1:-1]
            if _IDENT_RE.fullmatch(inner) or not _is_concrete_value(f'"{inner}"', min_length=3):
                continue
        elif not _is_concrete_value(value, min_length=3):
            continue
        if context is None:  # found once per text, so many candidates cost no rescans
            context = [m.start() for m in _CONN_CONTEXT_RE.finditer(text)]
        index = bisect.bisect_left(context, match.start() - _CONTEXT_WINDOW)
        if index < len(context) and context[index] <= match.end() + _CONTEXT_WINDOW:
            yield match.span()


# --- password_assignment --------------------------------------------------------------------------

_ASSIGNMENT_RE = re.compile(
    r"""
    (?i:
      pass(?:words?|wd|phrase)
      | client[_ -]?secret | secret[_ -]?(?:access[_ -]?)?key | secrets?
      | api[_ -]?key | access[_ -]?key | private[_ -]?key | signing[_ -]?key | encryption[_ -]?key
      | (?:access|auth|refresh|api|bearer|session|bot|oauth|personal[_ -]access)[_ -]?token
      | credentials?
    )
    ["']?[ \t]{0,3}
    (?::=|=>|==|[:=]|[ \t](?i:is|was)[ \t]{1,3}(?::[ \t]{0,3})?)
    [ \t]{0,3}
    (?P<value>"[^"\n]{1,256}"|'[^'\n]{1,256}'|`[^`\n]{1,256}`|[^\s"'`,;&)\]}>]{1,256})
    """,
    re.VERBOSE,
)
_XML_SECRET_RE = re.compile(
    r"<(?P<tag>(?i:password|passwd|secret|client_?secret|api_?key|access_?token|auth_?token))>"
    r"(?P<value>[^<\n]{1,256})</(?P=tag)>"
)


def _find_password_assignments(text: str) -> Iterator[Span]:
    for match in _ASSIGNMENT_RE.finditer(text):
        if _is_concrete_value(match.group("value"), min_length=6):
            yield match.span()
    for match in _XML_SECRET_RE.finditer(text):
        if _is_concrete_value('"' + match.group("value") + '"', min_length=6):
            yield match.span()


# --- env_assignment -------------------------------------------------------------------------------

_ENV_RE = re.compile(
    r"(?<![A-Za-z0-9_$.-])(?:export[ \t]{1,4})?(?P<name>[A-Z][A-Z0-9_]{1,127})="
    r"(?P<value>\"[^\"\n]{0,4096}\"|'[^'\n]{0,4096}'|[^\s\"'`]{0,4096})"
)
_ENV_LINE_RE = re.compile(
    r"[ \t]{0,8}(?:export[ \t]{1,4})?[A-Z][A-Z0-9_]{1,127}="
    r"(?:\"[^\"\n]{0,4096}\"|'[^'\n]{0,4096}'|[^\s\"'`#]{0,4096}(?<![,;(]))"  # code ends in , ; (
    r"(?:[ \t]{1,8}#[^\n]{0,4096})?[ \t]{0,8}"
)
_SENSITIVE_PARTS = frozenset(
    {
        "KEY",
        "KEYS",
        "SECRET",
        "SECRETS",
        "TOKEN",
        "TOKENS",
        "PASSWORD",
        "PASSWORDS",
        "PASSWD",
        "PWD",
        "PASS",
        "PASSPHRASE",
        "CREDENTIAL",
        "CREDENTIALS",
        "CREDS",
        "AUTH",
        "PRIVATE",
        "DSN",
        "CONN",
        "APIKEY",
        "SECRETKEY",
        "ACCESSKEY",
        "PRIVATEKEY",
        "COOKIE",
        "SALT",
        "PEPPER",
    }
)
_SENSITIVE_SUBSTRINGS = ("PASSWORD", "PASSWD", "SECRET", "CREDENTIAL", "APIKEY", "PASSPHRASE")
# When the name ends in one of these, it configures how a secret is handled, not the secret itself.
_NEUTRAL_SUFFIXES = frozenset(
    {
        "TYPE",
        "MODE",
        "PROVIDER",
        "ALGORITHM",
        "ALG",
        "SIZE",
        "BITS",
        "LENGTH",
        "LEN",
        "TTL",
        "EXPIRY",
        "EXPIRES",
        "LIFETIME",
        "TIMEOUT",
        "FILE",
        "PATH",
        "DIR",
        "ENABLED",
        "DISABLED",
        "ENABLE",
        "DISABLE",
        "REQUIRED",
        "NAME",
        "ID",
        "URL",
        "URI",
        "ENDPOINT",
        "ISSUER",
        "AUDIENCE",
        "HEADER",
        "FORMAT",
        "VERSION",
        "ROTATION",
        "POLICY",
        "BACKEND",
        "STORE",
        "VAULT",
        "COUNT",
        "MIN",
        "MAX",
        "LIMIT",
        "PREFIX",
        "SCOPE",
        "SCOPES",
        "METHOD",
        "STRATEGY",
        "LOCATION",
        "REGION",
        "HOST",
        "PORT",
        "USER",
        "USERNAME",
        "FIELD",
        "PARALLELISM",
        "HASH",
        "HASHER",
        "HASHING",
        "ENCODING",
        "CIPHER",
        "CHECK",
        "VALIDATION",
        "RESET",
        "REGEX",
        "PATTERN",
        "COMPLEXITY",
        "HISTORY",
        "RETRIES",
        "ATTEMPTS",
        "DELAY",
        "INTERVAL",
        "CACHE",
        "STORAGE",
        "SOURCE",
        "KIND",
        "SERVICE",
        "SERVER",
        "ROLE",
        "GROUP",
        "REALM",
        "DOMAIN",
        "ALIAS",
        "LABEL",
        "ARN",
        "USAGE",
        "PURPOSE",
        "SCHEME",
        "DAYS",
        "HOURS",
        "MINUTES",
        "SECONDS",
        "MS",
        "SEC",
    }
)


def _sensitive_env_name(name: str) -> bool:
    if "DATABASE_URL" in name or "CONNECTION_STRING" in name:
        return True
    parts = [p for p in name.split("_") if p]
    if not parts:
        return False

    def sensitive(part: str) -> bool:
        return part in _SENSITIVE_PARTS or any(s in part for s in _SENSITIVE_SUBSTRINGS)

    if sensitive(parts[-1]):
        return True
    return any(sensitive(p) for p in parts) and parts[-1] not in _NEUTRAL_SUFFIXES


def _env_value_is_secret(value: str) -> bool:
    inner = _unquote(value).strip().rstrip(".,;:!?)")
    if len(inner) < 3 or _is_placeholder(inner) or _DIGITS_RE.fullmatch(inner):
        return False
    if _UPPER_WORD_RE.fullmatch(inner):  # KEY=VALUE, LOG_LEVEL=DEBUG: a metavariable or a mode
        return False
    return "@" in inner or not _is_reference(inner)


def _find_env_assignments(text: str) -> Iterator[Span]:
    for match in _ENV_RE.finditer(text):
        value = match.group("value")
        named = _sensitive_env_name(match.group("name")) and _env_value_is_secret(value)
        if named or _looks_random(_unquote(value), min_length=20):
            yield match.span()
    yield from _find_env_blocks(text)


def _find_env_blocks(text: str) -> Iterator[Span]:
    """Two or more adjacent .env lines (comments may sit between them) are a pasted .env file."""
    block_start = block_end = -1
    count = 0
    offset = 0
    for line in text.splitlines(keepends=True):
        body = line.rstrip("\r\n")
        stripped = body.strip()
        if _ENV_LINE_RE.fullmatch(body):
            if count == 0:
                block_start = offset
            count += 1
            block_end = offset + len(body)
        elif not (stripped.startswith("#") and count):
            if count >= 2:
                yield block_start, block_end
            count = 0
        offset += len(line)
    if count >= 2:
        yield block_start, block_end


# --- session_cookie -------------------------------------------------------------------------------

_COOKIE_HEADER_RE = re.compile(
    r"(?<![A-Za-z0-9_-])(?i:set-cookie|cookie)[\"']?[ \t]{0,4}:[ \t]{0,4}[\"']?"
    r"(?P<name>[A-Za-z0-9_.!#$%&*+^|~-]{1,128})=(?P<value>[^\s;,\"'\\]{1,4096})"
)
# Anchored on the session word; the rest of the cookie name is walked back in Python.
_SESSION_ID_RE = re.compile(r"(?i:sess(?:ion)?(?:[_-]?id)?|sid)=[\"']?(?P<value>[A-Za-z0-9%._:/+=-]{16,4096})")
_COOKIE_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")


def _session_name_start(text: str, start: int) -> int | None:
    """Accept PHPSESSID, JSESSIONID, connect.sid, _app_session, ASP.NET_SessionId, but not 'grasid'."""
    name_start = start
    while name_start > 0 and start - name_start < 40 and text[name_start - 1] in _COOKIE_NAME_CHARS:
        name_start -= 1
    prefix = text[name_start:start].lower()
    if not prefix or prefix[-1] in "_.-" or prefix in {"php", "j"}:
        return name_start
    return None


def _find_session_cookies(text: str) -> Iterator[Span]:
    for match in _COOKIE_HEADER_RE.finditer(text):
        value = match.group("value")
        if len(value) >= 8 and not _is_placeholder(value) and _credential_like(value):
            yield match.span()
    for match in _SESSION_ID_RE.finditer(text):
        start = _session_name_start(text, match.start())
        value = match.group("value")
        if start is not None and not _is_placeholder(value) and _credential_like(value):
            yield start, match.end()


# --- high_entropy ---------------------------------------------------------------------------------

# Runs are cut at 4096 characters so a megabyte of one character class costs linear time.
_TOKEN_RE = re.compile(r"[A-Za-z0-9+/_-]{24,4096}={0,3}")
_URL_START_RE = re.compile(r"://")
_URL_REST_RE = re.compile(r"[^\s\"'<>`]{0,8192}")
_SSH_PUBLIC_KEY_RE = re.compile(
    r"(?:ssh-(?:rsa|dss|ed25519)|ecdsa-sha2-nistp[0-9]{3}|sk-(?:ssh-ed25519|ecdsa-sha2-nistp256)"
    r"@openssh\.com)[ \t]{1,4}$"
)
_PUBLIC_LABEL = (
    r"(?:[A-Z0-9]{1,16} ){0,3}(?:PUBLIC KEY|CERTIFICATE|CERTIFICATE REQUEST|PGP PUBLIC KEY BLOCK"
    r"|PGP SIGNATURE|PGP MESSAGE|X509 CRL|TRUSTED CERTIFICATE)"
)
_PUBLIC_PEM_BEGIN_RE = re.compile(rf"-{{5}}BEGIN {_PUBLIC_LABEL}-{{5}}")
_PUBLIC_PEM_END_RE = re.compile(rf"-{{5}}END {_PUBLIC_LABEL}-{{5}}")


def _benign_spans(text: str) -> list[Span]:
    """URLs without credentials and public key material are high-entropy but not secret."""
    spans: list[Span] = []
    covered = 0
    for match in _URL_START_RE.finditer(text):
        if match.start() < covered:  # inside the URL just measured: never walk the same text twice
            continue
        start = _scheme_start(text, match.start())
        if start is None:
            continue
        rest = _URL_REST_RE.match(text, match.end())
        covered = rest.end() if rest is not None else match.end()
        spans.append((start, covered))
    ends = [m.end() for m in _PUBLIC_PEM_END_RE.finditer(text)]
    for match in _PUBLIC_PEM_BEGIN_RE.finditer(text):
        index = bisect.bisect_left(ends, match.end())
        spans.append((match.start(), ends[index] if index < len(ends) else match.end()))
    spans.sort()
    return spans


def _inside(spans: list[Span], starts: list[int], start: int, end: int) -> bool:
    index = bisect.bisect_right(starts, start) - 1
    return index >= 0 and spans[index][0] <= start and end <= spans[index][1]


def _find_high_entropy(text: str) -> Iterator[Span]:
    benign: list[Span] | None = None
    starts: list[int] = []
    for match in _TOKEN_RE.finditer(text):
        token = match.group().rstrip("=")
        if not _looks_random(token, min_length=24):
            continue
        if benign is None:
            benign = _benign_spans(text)
            starts = [s for s, _ in benign]
        if _inside(benign, starts, match.start(), match.end()):
            continue
        if _SSH_PUBLIC_KEY_RE.search(text, max(0, match.start() - 64), match.start()):
            continue
        yield match.span()


# --- personal_data --------------------------------------------------------------------------------

_EMAIL_RE = re.compile(
    r"(?<![A-Za-z0-9._%+/-])(?P<local>[A-Za-z0-9._%+-]{1,64})@"
    r"(?P<domain>[A-Za-z0-9-]{1,63}(?:\.[A-Za-z0-9-]{1,63}){0,8}\.[A-Za-z]{2,24})(?![A-Za-z0-9-])"
    r"(?!:[A-Za-z0-9~/])"  # git@github.com:org/repo is an scp-style address, not a mailbox
)
_RESERVED_DOMAIN_RE = re.compile(
    r"(?:.{0,512}\.)?(?:example\.(?:com|org|net)|example|test|invalid|localhost|local)", re.IGNORECASE
)
_CARD_RE = re.compile(r"(?<![0-9.])(?:[0-9][ -]?){12,18}[0-9](?![0-9])")
_CARD_PREFIX_RE = re.compile(r"4|5[1-5]|2[2-7]|3[47]|3[068]|35|6011|64[4-9]|65|62")
_SSN_RE = re.compile(r"(?<![0-9-])(?P<area>[0-9]{3})-(?P<group>[0-9]{2})-(?P<serial>[0-9]{4})(?![0-9-])")
_PHONE_RE = re.compile(r"(?<![A-Za-z0-9+])\+[1-9][0-9]{7,14}(?![0-9])")


def _luhn_valid(digits: str) -> bool:
    total = 0
    for index, char in enumerate(reversed(digits)):
        value = int(char)
        if index % 2:
            value *= 2
            if value > 9:
                value -= 9
        total += value
    return total % 10 == 0


def _find_personal_data(text: str) -> Iterator[Span]:
    for match in _EMAIL_RE.finditer(text):
        if not _RESERVED_DOMAIN_RE.fullmatch(match.group("domain")):
            yield match.span()
    for match in _CARD_RE.finditer(text):
        digits = re.sub(r"[ -]", "", match.group())
        separators = set(re.sub(r"[0-9]", "", match.group()))
        if len(separators) > 1 or not 13 <= len(digits) <= 19:
            continue
        if _CARD_PREFIX_RE.match(digits) and _luhn_valid(digits):
            yield match.span()
    for match in _SSN_RE.finditer(text):
        area = match.group("area")
        if area in {"000", "666"} or area.startswith("9"):
            continue
        if match.group("group") != "00" and match.group("serial") != "0000":
            yield match.span()
    for match in _PHONE_RE.finditer(text):
        yield match.span()


# --- scanning -------------------------------------------------------------------------------------

_DETECTORS: dict[str, Callable[[str], Iterator[Span]]] = {
    "private_key": _find_private_keys,
    "cloud_key": _find_cloud_keys,
    "api_token": _find_api_tokens,
    "jwt": _find_jwts,
    "bearer_token": _find_bearer_tokens,
    "url_credentials": _find_url_credentials,
    "connection_string": _find_connection_strings,
    "password_assignment": _find_password_assignments,
    "env_assignment": _find_env_assignments,
    "session_cookie": _find_session_cookies,
    "high_entropy": _find_high_entropy,
    "personal_data": _find_personal_data,
}


def _merge(spans: Iterable[Span]) -> list[Span]:
    """One finding per stretch of text per category, however many patterns agreed on it."""
    merged: list[Span] = []
    for start, end in sorted(spans):
        if merged and start < merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def scan_text(text: str, *, categories: frozenset[str] = DEFAULT_CATEGORIES, path: str = "") -> list[SecretFinding]:
    """Report every secret-shaped span in one string; an empty list means the string may be stored.

    Unknown category names are ignored so a host policy written for a newer detector still loads.
    """
    findings = [
        SecretFinding(category=category, path=path, start=start, end=end)
        for category in CATEGORIES
        if category in categories
        for start, end in _merge(_DETECTORS[category](text))
    ]
    findings.sort(key=lambda f: (f.path, f.start, f.category))
    return findings


def scan_value(
    value: object, *, categories: frozenset[str] = DEFAULT_CATEGORIES, path: str = ""
) -> list[SecretFinding]:
    """Scan every string inside a JSON-like value, so no field of a capture escapes the detector.

    Dict keys are schema-defined names and are not scanned; their values are. Iterative, so a
    deeply nested payload cannot exhaust the stack, and cycle-safe for in-memory objects.
    """
    findings: list[SecretFinding] = []
    stack: list[tuple[object, str, frozenset[int]]] = [(value, path, frozenset())]
    while stack:
        current, where, ancestors = stack.pop()
        if isinstance(current, str):
            findings.extend(scan_text(current, categories=categories, path=where))
            continue
        if isinstance(current, dict):
            children: list[tuple[str, object]] = [(str(k), v) for k, v in current.items()]
        elif isinstance(current, list | tuple):
            children = [(str(i), v) for i, v in enumerate(current)]
        else:
            continue
        if id(current) in ancestors:
            continue
        inner = ancestors | {id(current)}
        for segment, child in reversed(children):
            stack.append((child, f"{where}/{segment}" if where else segment, inner))
    findings.sort(key=lambda f: (f.path, f.start, f.category))
    return findings


def secret_categories(findings: Iterable[SecretFinding]) -> list[str]:
    """What kinds of secret were seen, for a rejection reason that never repeats the secret."""
    return sorted({finding.category for finding in findings})
