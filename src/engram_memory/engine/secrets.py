"""Refuse secrets at capture, because credentials must never reach the memory store (SPEC section 10).

Conservative by design: a hit silently rejects a memory, so only credential shapes and noise stop it.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import math
import re
import string
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

# ReDoS discipline: every quantifier below is bounded and no group repeats an unbounded group.
# Patterns start with a literal where possible (the regex engine then jumps between candidate
# positions instead of trying each one); where a look-behind guard is needed it either sits after
# the literal or the boundary is checked in Python on the (rare) match. A 1 MiB adversarial
# string therefore costs linear time. Keep it that way when editing.

_ALNUM = frozenset(string.ascii_letters + string.digits)
_WORD_CHARS = _ALNUM | {"_"}
_TOKEN_CHARS = _ALNUM | {"_", "-"}


def _preceded_by(text: str, start: int, chars: frozenset[str]) -> bool:
    return start > 0 and text[start - 1] in chars


# --- telling a credential from a word, a name or a placeholder -----------------------------------


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_PLACEHOLDER_WORDS = _words(
    """
    password passwd pass pwd secret token apikey api_key api-key key changeme change_me
    change-me changeit redacted hidden masked removed omitted placeholder example sample dummy
    fake test todo tbd none null nil undefined empty true false yes no on off n/a na required
    optional unset notset not_set not-set foo bar baz foobar value val string str
    """
)
_PLACEHOLDER_RE = re.compile(
    r"""
    <[^<>\n]{0,80}>                                # <redacted>, <your-token>
    | \[[^\[\]\n]{0,80}\]                          # [REDACTED]
    | \$\{\{?[^{}\n]{0,120}\}\}?                   # ${VAR}, ${{ secrets.X }}
    | \{\{[^{}\n]{0,120}\}\}                       # {{ vault_password }}
    | \{[A-Za-z_][A-Za-z0-9_.]{0,80}\}             # {db_password}
    | \$[A-Za-z_][A-Za-z0-9_]{0,80}                # $DB_PASSWORD
    | \$\(.{0,256}                                 # $(cat key.txt)
    | (?:\$\{|\{\{|<|%\().{0,256}                  # a template cut short by whitespace
    | %\(?[A-Za-z_]{0,40}\)?s                      # %s, %(password)s
    | %[A-Za-z_][A-Za-z0-9_]{0,80}%                # %DB_PASSWORD%
    | [*xX.\u2022#_-]{1,256}                       # ****, xxxx, ....
    | \u2026
    | (?i:(?:my|your|the|some|a|an|new|old|db|user)[_ -]?
         (?:secret[_ -]?)?(?:password|passwd|pass|pwd|secret|token|api[_ -]?key|key)
         (?:[_ -]?(?:here|goes[_ -]?here|value))?[0-9]{0,3})
    | (?i:(?:insert|enter|put|add)[_ -][A-Za-z0-9_ -]{0,60})
    | (?i:(?:my|your|example|sample|test|dummy|fake)[_ -][A-Za-z_ -]{1,60})  # my-client-secret
    | (?i:(?:password|passwd|secret|changeme|test)[0-9]{0,4})                # password1
    """,
    re.VERBOSE | re.DOTALL,
)
_TEMPLATE_FIELD_RE = re.compile(r"\{[A-Za-z0-9_.!:\[\]]{0,60}\}|%[sd]|%\([A-Za-z_]{1,40}\)s|\$\{")
_IDENT = r"[A-Za-z_][A-Za-z0-9_]{0,120}"
_IDENT_RE = re.compile(_IDENT)
_DOTTED_RE = re.compile(rf"{_IDENT}(?:\.{_IDENT}){{1,12}}")
_CALL_RE = re.compile(rf"{_IDENT}(?:\.{_IDENT}){{0,12}}[(\[].{{0,256}}", re.DOTALL)
_PATH_OR_URL_RE = re.compile(
    r"(?:~|\.{1,2})?/[^\s]{0,512}"  # /run/secrets/db, ./key.pem, ~/.aws/credentials
    r"|[A-Za-z]:\\[^\s]{0,512}"  # C:\keys\app.pfx
    r"|[A-Za-z][A-Za-z0-9+.-]{1,31}://[^\s@]{0,512}"  # a URL that carries no credentials
    r"|arn:[A-Za-z0-9-]{1,32}:[^\s]{0,1024}"  # an AWS resource name
)
_UPPER_WORD_RE = re.compile(r"[A-Z]{1,64}(?:_[A-Z0-9]{1,63}){0,31}")
_UPPER_SNAKE_RE = re.compile(r"_{0,2}[A-Z][A-Z0-9]{0,63}(?:_[A-Z0-9]{1,63}){1,31}")
_WORD = r"(?:(?:[a-z]{1,64}|[A-Z][a-z]{0,63}|[A-Z]{1,64})[0-9]{0,8}|[0-9]{1,8})"
_MULTI_WORD_RE = re.compile(rf"{_WORD}(?:[_-]{_WORD}){{1,31}}")
_DIGITS_RE = re.compile(r"[0-9]{1,256}(?:\.[0-9]{1,64})?")
_LETTERS_RE = re.compile(r"[A-Za-z]{1,256}")
_YAML_TAG_RE = re.compile(r"![A-Za-z][A-Za-z0-9_:.-]{0,40}")
_CAPITALIZED_RE = re.compile(r"[A-Z][a-z]{2,64}")
_WORD_RUN_RE = re.compile(r"[A-Z][a-z]{2,64}|[a-z]{3,64}|[A-Z]{3,64}(?![a-z])")
_RANDOMNESS_THRESHOLD = -0.2
_CLASS_TABLE = str.maketrans(
    string.ascii_uppercase + string.ascii_lowercase + string.digits, "U" * 26 + "L" * 26 + "D" * 10
)
_CLASS_SEGMENT_RE = re.compile(r"[UDL]{1,8192}")
_CLASS_RUN_RE = re.compile(r"U{1,8192}|L{1,8192}|D{1,8192}")
_DIGIT_RE = re.compile(r"[0-9]")


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'`":
        return value[1:-1]
    return value


def _is_placeholder(value: str) -> bool:
    """Obvious placeholders and variable references are documentation, not credentials."""
    value = _unquote(value.strip())
    if not value or value.lower() in _PLACEHOLDER_WORDS or len(set(value)) <= 2:
        return True
    return _PLACEHOLDER_RE.fullmatch(value) is not None


def _is_reference(value: str) -> bool:
    """A value naming a variable, attribute, call, file, URL or ARN holds no secret itself."""
    if _CALL_RE.fullmatch(value) or _PATH_OR_URL_RE.fullmatch(value):
        return True
    if _DOTTED_RE.fullmatch(value):
        return all(len(part) <= 3 or part.islower() or part.isupper() or _is_wordish(part) for part in value.split("."))
    return False


def _randomness(token: str) -> float:
    """How much a token reads like generated noise rather than words; above -0.2 means noise.

    Two measured signals: generated keys flip between upper, lower and digit on most adjacent
    pairs (about 0.6 of them) while identifiers flip only at word boundaries (under 0.45); and
    identifiers are mostly covered by word-shaped runs (over 0.65) while random text is not (under
    0.6). Their difference separated every identifier in the Python standard library and the
    installed packages (at most -0.32) from 98% of random base64/base62 tokens.
    """
    classes = token.translate(_CLASS_TABLE)  # A-Z -> U, a-z -> L, 0-9 -> D; counted in C
    segments = _CLASS_SEGMENT_RE.findall(classes)
    alnum = sum(len(segment) for segment in segments)
    if not alnum:
        return -1.0
    pairs = alnum - len(segments)
    flips = len(_CLASS_RUN_RE.findall(classes)) - len(segments)
    covered = sum(len(word) for word in _WORD_RUN_RE.findall(token))
    return (flips / pairs if pairs else 0.0) - covered / alnum


def _is_wordish(token: str) -> bool:
    """Identifiers built from words (snake, kebab, camel, paths) rather than noise."""
    return _randomness(token) < _RANDOMNESS_THRESHOLD


def _is_compound_name(value: str) -> bool:
    """Ed25519PrivateKey, _PasswordType, SecretStr: a type or variable name, not a password."""
    capitalized = _CAPITALIZED_RE.findall(value)
    return bool(_IDENT_RE.fullmatch(value)) and len(capitalized) >= 2 and _is_wordish(value)


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
    """A quoted token is a literal unless it reads as prose, a word, a name or a reference.

    "rotated every quarter", "minutes", "ACCESS_TOKEN", "keyfile_password", "db.password" all pass;
    PEM text is left to the private_key detector, which knows a placeholder body from a key.
    """
    if " " in inner:
        prose = all(_LETTERS_RE.fullmatch(word) for word in inner.split())
        return not prose and not _PEM_BEGIN_RE.search(inner)
    return not (
        _PATH_OR_URL_RE.fullmatch(inner)
        or _is_resource_path(inner)
        or (_LETTERS_RE.fullmatch(inner) and _is_wordish(inner))
        or _UPPER_SNAKE_RE.fullmatch(inner)
        or _MULTI_WORD_RE.fullmatch(inner)
        or _is_compound_name(inner)
        or _DOTTED_RE.fullmatch(inner)
    )


def _is_resource_path(value: str) -> bool:
    """projects/p/secrets/db-password: a name made of plain segments, not a secret."""
    segments = value.split("/")
    return len(segments) > 1 and all(segment and _is_plain_segment(segment) for segment in segments)


def _reads_as_name(inner: str) -> bool:
    """An unquoted word, identifier, reference, number or bit of markup rather than a secret."""
    return bool(
        inner[0] in ":({[<"
        or _YAML_TAG_RE.fullmatch(inner)  # password: !vault | (Ansible), !Ref (CloudFormation)
        or _is_reference(inner)
        or _is_resource_path(inner)
        or _UPPER_SNAKE_RE.fullmatch(inner)
        or _DIGITS_RE.fullmatch(inner)  # lengths, timeouts, counts
        or (_LETTERS_RE.fullmatch(inner) and _is_wordish(inner))  # a plain word or camelCase name
        or _is_compound_name(inner)
        or _MULTI_WORD_RE.fullmatch(inner)  # "min-length-12", "not_configured"
    )


def _credential_like(token: str) -> bool:
    """A header or cookie value counts when it is not prose, a placeholder or a variable name."""
    if _is_placeholder(token) or _UPPER_SNAKE_RE.fullmatch(token):
        return False
    if _MULTI_WORD_RE.fullmatch(token) or (_LETTERS_RE.fullmatch(token) and _is_wordish(token)):
        return False
    return not _is_reference(token)


def _masked(body: str) -> bool:
    """Key-shaped documentation such as ghp_xxxx... or AKIAXXXXXXXXXXXXXXXX is not a key."""
    return len({char for char in body if char.isalnum()}) <= 4


def _shannon_entropy(token: str) -> float:
    total = len(token)
    return -sum(n / total * math.log2(n / total) for n in Counter(token).values())


def _char_classes(token: str) -> int:
    upper = token.lower() != token
    lower = token.upper() != token
    digit = _DIGIT_RE.search(token) is not None
    symbol = not token.isalnum()
    return upper + lower + digit + symbol


# Shapes that are high-entropy by nature but are ids or digests, never credentials.
_EXCLUDED_TOKEN_RE = re.compile(
    r"""
    (?:0x)?[0-9a-fA-F]{1,4096}                                        # hex: git SHAs, digests
    | [0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}  # UUID
    | [a-z][a-z0-9]{0,15}_[a-z2-7]{8,4096}                           # base32 ids: mem_..., cand_...
    | (?:sha|SHA)(?:1|224|256|384|512)[-_=].{0,4096}                 # SRI / digest prefixes
    | [0-9]{1,4096}
    | xn--[a-z0-9-]{1,4096}                                          # punycode domain labels
    """,
    re.VERBOSE | re.DOTALL,
)
_SEGMENT_SPLIT_RE = re.compile(r"[-_/+]{1,64}")


def _is_excluded_token(token: str) -> bool:
    """Ids, digests and paths: every separated segment is a word, a hex/decimal run or tiny.

    Covers subnet-08fc749671b2d077c, vpce-0f89a33420c1931d7, src/engram_memory/engine and
    AWS documentation ids with EXAMPLE spliced into the hex; base64 never splits that cleanly.
    """
    if _EXCLUDED_TOKEN_RE.fullmatch(token):
        return True
    segments = [s for s in _SEGMENT_SPLIT_RE.split(token) if s]
    return bool(segments) and all(_is_plain_segment(s) for s in segments)


def _is_plain_segment(segment: str) -> bool:
    if len(segment) <= 3 or _EXCLUDED_TOKEN_RE.fullmatch(segment.replace("EXAMPLE", "")):
        return True
    return _is_wordish(segment)


def _looks_random(token: str, *, min_length: int) -> bool:
    """Entropy plus mixed character classes plus not-made-of-words: the shape of generated keys."""
    if len(token) < min_length or _char_classes(token) < 3 or _shannon_entropy(token) < 4.0:
        return False
    return not _is_wordish(token) and not _is_excluded_token(token)


# --- private_key ----------------------------------------------------------------------------------

_PEM_BEGIN_RE = re.compile(r"-----? ?BEGIN (?:[A-Z0-9]{1,16} ){0,3}PRIVATE KEY(?: BLOCK)? ?----")
_PEM_END_RE = re.compile(r"-----? ?END (?:[A-Z0-9]{1,16} ){0,3}PRIVATE KEY(?: BLOCK)? ?----")
_PEM_BODY_RE = re.compile(r"[A-Za-z0-9+/]{16}")
_OTHER_PRIVATE_KEY_RE = re.compile(r"PuTTY-User-Key-File-[0-9]{1,2}: ?[a-z0-9-]{3,40}|AGE-SECRET-KEY-1[0-9A-Z]{58}")


def _find_private_keys(text: str, folded: str) -> Iterator[Span]:
    """The header alone is enough; when the footer follows, the whole block is the span.

    A complete block whose body holds no base64 at all (XXXX, "key omitted") is documentation.
    A body is read only up to the next header, so every character is examined once.
    """
    begins = list(_PEM_BEGIN_RE.finditer(text))
    ends = list(_PEM_END_RE.finditer(text))
    end_starts = [m.start() for m in ends]
    used: set[int] = set()
    for position, begin in enumerate(begins):
        limit = begins[position + 1].start() if position + 1 < len(begins) else len(text)
        index = bisect.bisect_left(end_starts, begin.end())
        if index < len(ends) and ends[index].end() <= limit:
            used.add(index)
            body = text[begin.end() : ends[index].start()]
            if _PEM_BODY_RE.search(body) and not _masked(body):
                yield begin.start(), ends[index].end()
        else:
            yield begin.span()
    for index, end in enumerate(ends):
        if index not in used:
            yield end.span()
    for match in _OTHER_PRIVATE_KEY_RE.finditer(text):
        yield match.span()


# --- cloud_key ------------------------------------------------------------------------------------

# Case-sensitive shapes run on the text; every alternative opens with a literal, so the engine
# jumps straight to candidate positions.
_CLOUD_KEY_RE = re.compile(
    r"AKIA[A-Z0-9]{16}|ASIA[A-Z0-9]{16}|ABIA[A-Z0-9]{16}|ACCA[A-Z0-9]{16}"
    r"|AIza[0-9A-Za-z_-]{35}|GOCSPX-[A-Za-z0-9_-]{28}"
)
# Keyword shapes run on the lower-cased text.
_CLOUD_ASSIGNED_RE = re.compile(
    r"""
    aws_?secret_?(?:access_?)?key["']?[ \t]{0,4}(?::=|=>|[:=])[ \t]{0,4}["']?[a-z0-9/+]{40}(?![a-z0-9/+])
    | accountkey=[a-z0-9+/]{40,128}={0,2}
    | sharedaccesskey=[a-z0-9+/]{40,128}={0,2}
    | x-amz-signature=[0-9a-f]{64}
    | x-goog-signature=[0-9a-f]{64}
    """,
    re.VERBOSE,
)


def _find_cloud_keys(text: str, folded: str) -> Iterator[Span]:
    for match in _CLOUD_KEY_RE.finditer(text):
        start, end, key = match.start(), match.end(), match.group()
        body = key[7:] if key.startswith("GOCSPX-") else key[4:]
        boundary = _TOKEN_CHARS if key.startswith(("AIza", "GOCSPX-")) else _ALNUM
        if _preceded_by(text, start, boundary) or (end < len(text) and text[end] in boundary):
            continue
        if not _masked(body):
            yield match.span()
    for match in _CLOUD_ASSIGNED_RE.finditer(folded):
        yield match.span()


# --- api_token ------------------------------------------------------------------------------------

# Prefix-anchored vendor shapes only: a bare random string is the high_entropy detector's job.
# Every alternative opens with a literal so the engine jumps between candidate positions.
_API_TOKEN_RE = re.compile(
    r"""
    gh[pousr]_(?P<github>[A-Za-z0-9]{36,255})
    | github_pat_(?P<github_pat>[A-Za-z0-9_]{22,255})
    | gl(?:pat|ptt|dt|rt)-(?P<gitlab>[A-Za-z0-9_-]{20,64})
    | xox[abprs]-(?P<slack>[A-Za-z0-9-]{10,250})
    | xapp-[0-9]-[A-Z0-9]{8,16}-[0-9]{8,16}-[a-z0-9]{32,80}
    | sk_(?:live|test)_(?P<stripe>[A-Za-z0-9]{10,247})
    | rk_(?:live|test)_(?P<stripe_restricted>[A-Za-z0-9]{10,247})
    | whsec_[A-Za-z0-9]{24,64}
    | sk-ant-(?P<anthropic>[A-Za-z0-9_-]{20,256})
    | sk-(?:proj-|svcacct-|admin-)?(?P<openai>[A-Za-z0-9_-]{20,256})
    | npm_(?P<npm>[A-Za-z0-9]{36})
    | pypi-Ag[A-Za-z0-9_-]{50,1000}
    | SK[0-9a-f]{32}
    | SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}
    | hf_(?P<huggingface>[A-Za-z0-9]{34,40})
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
    | hooks\.slack\.com/(?:services|workflows)/T[A-Z0-9]{6,12}/[AB][A-Z0-9]{6,12}/[A-Za-z0-9]{20,40}
    """,
    re.VERBOSE,
)
_TELEGRAM_BOT_RE = re.compile(r"(?<![0-9])[0-9]{8,10}:AA[A-Za-z0-9_-]{33}(?![A-Za-z0-9_-])")
_TOKEN_BODIES = (
    "github",
    "github_pat",
    "gitlab",
    "slack",
    "stripe",
    "stripe_restricted",
    "anthropic",
    "npm",
    "huggingface",
)


def _is_api_token(match: re.Match[str], text: str) -> bool:
    # Token boundaries are checked here rather than by look-arounds: a failing look-ahead after a
    # long greedy body would make the engine back off through the whole body at every candidate.
    if not match.group().startswith("hooks."):
        end = match.end()
        if _preceded_by(text, match.start(), _TOKEN_CHARS) or (end < len(text) and text[end] in _TOKEN_CHARS):
            return False
    bodies = (match.group(name) for name in _TOKEN_BODIES)
    if any(body is not None and _masked(body) for body in bodies):
        return False
    openai = match.group("openai")
    # "sk-" also starts ordinary hyphenated words; real keys always mix case and digits.
    return openai is None or (not _masked(openai) and _char_classes(openai.replace("-", "")) >= 3)


def _find_api_tokens(text: str, folded: str) -> Iterator[Span]:
    for match in _API_TOKEN_RE.finditer(text):
        if _is_api_token(match, text):
            yield match.span()
    if ":AA" in text:
        for match in _TELEGRAM_BOT_RE.finditer(text):
            yield match.span()


# --- jwt ------------------------------------------------------------------------------------------

# The look-behind sits after the literal "eyJ" so the engine can still jump between candidates.
_JWT_RE = re.compile(
    r"eyJ(?<![A-Za-z0-9_-]eyJ)[A-Za-z0-9_-]{5,8192}\.ey[A-Za-z0-9_-]{5,16384}\.[A-Za-z0-9_-]{0,8192}"
    r"(?:\.[A-Za-z0-9_-]{0,16384}\.[A-Za-z0-9_-]{0,8192})?"  # the two extra parts of a JWE
)


def _find_jwts(text: str, folded: str) -> Iterator[Span]:
    for match in _JWT_RE.finditer(text):
        yield match.span()


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
    r"://(?P<user>[^\s:/?#@\"'<>`]{0,256})(?::(?P<password>[^\s/?#@\"'<>`]{1,256}))?@(?=[A-Za-z0-9\[])"
)
_SCHEME_CHARS = frozenset(string.ascii_letters + string.digits + "+.-")


def _scheme_start(text: str, colon: int) -> int | None:
    start = colon
    while start > 0 and colon - start < 32 and text[start - 1] in _SCHEME_CHARS:
        start -= 1
    while start < colon and not text[start].isalpha():
        start += 1
    return start if colon - start >= 2 else None


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


# --- password_assignment --------------------------------------------------------------------------

# Runs on the lower-cased text; every keyword alternative opens with a literal.
_ASSIGNMENT_RE = re.compile(
    r"""
    (?:
      pass(?:words?|wd|phrase) | client[_ -]?secret | secret[_ -]?(?:access[_ -]?)?key | secrets?
      | api[_ -]?key | access[_ -]?key | private[_ -]?key | signing[_ -]?key | encryption[_ -]?key
      | access[_ -]?token | auth[_ -]?token | refresh[_ -]?token | api[_ -]?token | bearer[_ -]?token
      | session[_ -]?token | bot[_ -]?token | oauth[_ -]?token | personal[_ -]access[_ -]?token
      | credentials?
    )
    ["']?[ \t]{0,3}
    (?::=|=>|==|[:=]|[ \t](?:is|was)[ \t]{1,3}(?::[ \t]{0,3})?)
    [ \t]{0,3}
    (?P<value>"[^"\n]{1,256}"|'[^'\n]{1,256}'|`[^`\n]{1,256}`|[^\s"'`,;&)\]}>]{1,256})
    """,
    re.VERBOSE,
)
# curl -u user:password, git --user name:password (on the lower-cased text)
_USER_OPTION_RE = re.compile(r"""-(?:u|-user)[ \t=]{1,4}["']?[^\s:"'@]{1,64}:(?P<value>[^\s"']{1,128})""")
_XML_SECRET_RE = re.compile(
    r"<(?P<tag>(?i:password|passwd|secret|client_?secret|api_?key|access_?token|auth_?token))>"
    r"(?P<value>[^<\n]{1,256})</(?P=tag)>"
)


def _find_password_assignments(text: str, folded: str) -> Iterator[Span]:
    for match in _ASSIGNMENT_RE.finditer(folded):
        # arn:aws:secretsmanager:...:secret:name is an address, not an assignment
        if _preceded_by(text, match.start(), frozenset(":/")):
            continue
        if _is_concrete_value(text[match.start("value") : match.end("value")], min_length=6):
            yield match.span()
    for match in _USER_OPTION_RE.finditer(folded):
        if match.start() > 0 and not text[match.start() - 1].isspace():
            continue
        if _is_concrete_value(text[match.start("value") : match.end("value")], min_length=6):
            yield match.span()
    if "<" in text:
        for match in _XML_SECRET_RE.finditer(text):
            if _is_concrete_value('"' + match.group("value") + '"', min_length=6):
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


# --- high_entropy ---------------------------------------------------------------------------------

# Runs are cut at 4096 characters so a megabyte of one character class costs linear time; "=" may
# only close a token (base64 padding), so key=value pairs split into their parts.
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
    return _merge(spans)


def _find_high_entropy(text: str, folded: str) -> Iterator[Span]:
    benign: list[Span] | None = None
    starts: list[int] = []
    for match in _TOKEN_RE.finditer(text):
        if not _looks_random(match.group().rstrip("="), min_length=24):
            continue
        if benign is None:
            benign = _benign_spans(text)
            starts = [start for start, _ in benign]
        index = bisect.bisect_right(starts, match.start()) - 1
        if index >= 0 and match.end() <= benign[index][1]:
            continue
        if _SSH_PUBLIC_KEY_RE.search(text, max(0, match.start() - 64), match.start()):
            continue
        yield match.span()


# --- personal_data --------------------------------------------------------------------------------

# Anchored on "@"; the local part is walked back in Python (at most 64 characters).
_EMAIL_DOMAIN_RE = re.compile(
    r"@(?P<domain>[A-Za-z0-9-]{1,63}(?:\.[A-Za-z0-9-]{1,63}){0,8}\.[A-Za-z]{2,24})(?![A-Za-z0-9-])"
    r"(?!:[A-Za-z0-9~/])"  # git@github.com:org/repo is an scp-style address, not a mailbox
)
_EMAIL_LOCAL_CHARS = frozenset(string.ascii_letters + string.digits + "._%+-")
_RESERVED_TLDS = frozenset({"example", "test", "invalid", "localhost", "local"})
_RESERVED_DOMAINS = ("example.com", "example.org", "example.net")
_CARD_RE = re.compile(r"(?<![0-9.])(?:[0-9][ -]?){12,18}[0-9](?![0-9])")
_CARD_PREFIX_RE = re.compile(r"4|5[1-5]|2[2-7]|3[47]|3[068]|35|6011|64[4-9]|65|62")
_SSN_RE = re.compile(r"(?<![0-9-])(?P<area>[0-9]{3})-(?P<group>[0-9]{2})-(?P<serial>[0-9]{4})(?![0-9-])")
_PHONE_RE = re.compile(r"\+(?<![A-Za-z0-9+]\+)[1-9][0-9]{7,14}(?![0-9])")


def _luhn_valid(digits: str) -> bool:
    total = 0
    for index, char in enumerate(reversed(digits)):
        value = int(char) * (2 if index % 2 else 1)
        total += value - 9 if value > 9 else value
    return total % 10 == 0


def _reserved_domain(domain: str) -> bool:
    """RFC 2606 names are documentation: jane@example.com is nobody's address."""
    lowered = domain.lower()
    if lowered.rsplit(".", 1)[-1] in _RESERVED_TLDS:
        return True
    return any(lowered == name or lowered.endswith("." + name) for name in _RESERVED_DOMAINS)


def _find_emails(text: str) -> Iterator[Span]:
    for match in _EMAIL_DOMAIN_RE.finditer(text):
        start = match.start()
        while start > 0 and match.start() - start <= 64 and text[start - 1] in _EMAIL_LOCAL_CHARS:
            start -= 1
        local_length = match.start() - start
        plausible = 1 <= local_length <= 64 and not _preceded_by(text, start, frozenset("/"))
        if plausible and not _reserved_domain(match.group("domain")):
            yield start, match.end()


def _find_personal_data(text: str, folded: str) -> Iterator[Span]:
    if "@" in text:
        yield from _find_emails(text)
    for match in _CARD_RE.finditer(text):
        digits = match.group().replace(" ", "").replace("-", "")
        separators = {char for char in match.group() if not char.isdigit()}
        if len(separators) <= 1 and _CARD_PREFIX_RE.match(digits) and _luhn_valid(digits):
            yield match.span()
    for match in _SSN_RE.finditer(text):
        area = match.group("area")
        if area in {"000", "666"} or area.startswith("9"):
            continue
        if match.group("group") != "00" and match.group("serial") != "0000":
            yield match.span()
    if "+" in text:
        for match in _PHONE_RE.finditer(text):
            yield match.span()


# --- scanning -------------------------------------------------------------------------------------

# Each detector gets the text and its lower-cased twin of the same length (see _fold).
_DETECTORS: dict[str, Callable[[str, str], Iterator[Span]]] = {
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
# A detector runs only if one of its needles occurs in the lower-cased text: a cheap substring
# test that keeps scanning fast on long text that cannot contain its shape.
_NEEDLES: dict[str, tuple[str, ...]] = {
    "private_key": ("private key", "putty-user-key-file", "age-secret-key-"),
    "cloud_key": ("akia", "asia", "abia", "acca", "aiza", "gocspx-", "secret", "key=", "signature="),
    "api_token": ("_", "-", "sg.", "sk", "ya29.", "hvs.", "dapi", "dp.pt.", "hooks.slack.com", ":aa"),
    "jwt": ("eyj",),
    "bearer_token": ("bearer", "authorization", "key", "token"),
    "url_credentials": ("://",),
    "connection_string": ("password=", "pwd="),
    "password_assignment": ("pass", "secret", "key", "token", "credential", "-u", "--user"),
    "env_assignment": ("=",),
    "session_cookie": ("cookie", "sess", "sid="),
}


def _fold(text: str) -> str:
    """Lower-case without moving any offset: U+0130 is the one character whose lower() is longer."""
    return text.replace("\u0130", "I").lower()


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
    folded = _fold(text)
    findings: list[SecretFinding] = []
    for category in CATEGORIES:
        if category not in categories:
            continue
        needles = _NEEDLES.get(category)
        if needles is not None and not any(needle in folded for needle in needles):
            continue
        findings.extend(
            SecretFinding(category=category, path=path, start=start, end=end)
            for start, end in _merge(_DETECTORS[category](text, folded))
        )
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
            children: list[tuple[str, object]] = [(str(key), item) for key, item in current.items()]
        elif isinstance(current, list | tuple):
            children = [(str(index), item) for index, item in enumerate(current)]
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
