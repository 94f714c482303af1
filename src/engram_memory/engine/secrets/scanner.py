"""Run the detectors over a string or a JSON-like value and report findings that never repeat the secret."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from engram_memory.engine.secrets.detectors_assignments import (
    _find_bearer_tokens,
    _find_connection_strings,
    _find_env_assignments,
    _find_session_cookies,
    _find_url_credentials,
)
from engram_memory.engine.secrets.detectors_keys import (
    _find_api_tokens,
    _find_cloud_keys,
    _find_high_entropy,
    _find_jwts,
    _find_personal_data,
    _find_private_keys,
)
from engram_memory.engine.secrets.detectors_passwords import NEEDLES as PASSWORD_NEEDLES
from engram_memory.engine.secrets.detectors_passwords import _find_password_assignments
from engram_memory.engine.secrets.judgement import Span, _merge

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

# Personal data is a host policy choice, so it is never on unless asked for.
DEFAULT_CATEGORIES: frozenset[str] = frozenset(CATEGORIES) - {"personal_data"}


@dataclass(frozen=True, slots=True)
class SecretFinding:
    """One hit, located precisely enough for a reviewer; it never carries the matched text itself."""

    category: str
    path: str
    start: int
    end: int


# --- scanning -------------------------------------------------------------------------------------

# Each detector gets the text and its lower-cased twin of the same length (see _fold).
_DETECTORS: Mapping[str, Callable[[str, str], Iterator[Span]]] = MappingProxyType(
    {
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
)
# A detector runs only if one of its needles occurs in the lower-cased text: a cheap substring
# test that keeps scanning fast on long text that cannot contain its shape.
_NEEDLES: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "private_key": ("private key", "putty-user-key-file", "age-secret-key-"),
        "cloud_key": ("akia", "asia", "abia", "acca", "aiza", "gocspx-", "secret", "key=", "signature="),
        "api_token": (
            *("_", "-", "sg.", "sk", "ya29.", "hvs.", "dapi", "dp.pt.", "hooks.slack.com", ":aa", "sl.", "atlasv1"),
            *("key", "token", "키", "토큰", "密钥", "密鑰", "令牌", "キー", "トークン", "openai", "mistral", "cohere"),
            *("together", "deepgram", "groq", "gemini", "perplexity", "voyage", "elevenlabs", "assemblyai"),
        ),
        "jwt": ("eyj",),
        "bearer_token": ("bearer", "authorization", "key", "token"),
        "url_credentials": ("://",),
        "connection_string": ("password=", "pwd="),
        "password_assignment": (
            *PASSWORD_NEEDLES,
            *(
                "secret",
                "key",
                "token",
                "-u",
                "--user",
                "-p",
                "kennwort",
                "mot de passe",
                "contrase",
                "senha",
                "пароль",
            ),
        ),
        "env_assignment": ("=",),
        "session_cookie": ("cookie", "sess", "sid="),
    }
)


_NEEDLE_RES: Mapping[str, re.Pattern[str]] = MappingProxyType(
    {category: re.compile("|".join(re.escape(needle) for needle in needles)) for category, needles in _NEEDLES.items()}
)
# Any category's needle: most strings of a capture (refs, digests, short names) hold none, and then only
# the detectors without needles need to run (one search instead of one per category).
_ANY_NEEDLE_RE = re.compile("|".join(re.escape(needle) for needles in _NEEDLES.values() for needle in needles))
_UNNEEDLED = tuple(category for category in CATEGORIES if category not in _NEEDLES)


# The payload of an inline image, sound, video or font (a data URI) is random by nature and no
# credential: it is blanked (offsets kept) before the detectors read the text.
_MEDIA_DATA_URI_RE = re.compile(
    r"data:(?:image|audio|video|font)/[a-z0-9.+-]{1,64}(?:;[a-z0-9=._-]{1,64}){0,4};base64,(?P<payload>[a-z0-9+/=]{1,16777216})",
    re.IGNORECASE,
)


def _without_media(text: str) -> str:
    if "base64," not in text:
        return text
    return _MEDIA_DATA_URI_RE.sub(
        lambda m: m.group(0)[: m.start("payload") - m.start()] + " " * len(m.group("payload")), text
    )


def _fold(text: str) -> str:
    """Lower-case without moving any offset: U+0130 is the one character whose lower() is longer."""
    return text.replace("\u0130", "I").lower()


def scan_text(text: str, *, categories: frozenset[str] = DEFAULT_CATEGORIES, path: str = "") -> list[SecretFinding]:
    """Report every secret-shaped span in one string; an empty list means the string may be stored.

    Unknown category names are ignored so a host policy written for a newer detector still loads.
    """
    text = _without_media(text)
    folded = _fold(text)
    findings: list[SecretFinding] = []
    for category in CATEGORIES if _ANY_NEEDLE_RE.search(folded) is not None else _UNNEEDLED:
        if category not in categories:
            continue
        needles = _NEEDLE_RES.get(category)
        if needles is not None and needles.search(folded) is None:
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
