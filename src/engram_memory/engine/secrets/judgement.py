"""Tell a credential from a word, name, placeholder, path or id, so that only real secrets stop a capture.

Also holds the span and character primitives every detector shares.
"""

from __future__ import annotations

import math
import re
import string
from collections import Counter
from collections.abc import Iterable

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


def _merge(spans: Iterable[Span]) -> list[Span]:
    """One finding per stretch of text per category, however many patterns agreed on it."""
    merged: list[Span] = []
    for start, end in sorted(spans):
        if merged and start < merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


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
    | \$(?:[A-Z_][A-Z0-9_]{0,80}|[a-z_][a-z0-9_]{0,80}|[a-z]{1,20}(?:[A-Z][a-z]{1,20}){1,6}[0-9]{0,2}
        |(?:[A-Z][a-z]{1,20}){1,6}[0-9]{0,2})      # $DB_PASSWORD, $db_pass, $dbPassword, $DbPassword
    | \$\(.{0,256}                                 # $(cat key.txt)
    | (?:\$\{|\{\{|<|%\().{0,256}                  # a template cut short by whitespace
    | %s | %\([A-Za-z_]{1,40}\)s                   # %s, %(password)s
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
# The private_key detector's header, read here so a quoted PEM block is left to that detector.
_PEM_BEGIN_RE = re.compile(r"-----? ?BEGIN (?:[A-Z0-9]{1,16} ){0,3}PRIVATE KEY(?: BLOCK)? ?----")


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
        or (_YAML_TAG_RE.fullmatch(inner) and _is_wordish(inner[1:]))  # !vault (Ansible), !Ref (CloudFormation)
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
    """Key-shaped documentation (a known prefix followed by one repeated masking letter) is not a key."""
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
