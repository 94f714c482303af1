"""Detectors that know a secret by its own shape: key blocks, vendor prefixes, JWTs, noise, personal data.

Each takes the text and its lower-cased twin and yields the spans it finds.
"""

from __future__ import annotations

import bisect
import re
import string
from collections.abc import Iterator

from engram_memory.engine.secrets.judgement import (
    _ALNUM,
    _CAPITALIZED_RE,
    _PEM_BEGIN_RE,
    _TOKEN_CHARS,
    Span,
    _char_classes,
    _looks_random,
    _masked,
    _merge,
    _preceded_by,
    _shannon_entropy,
)

# --- private_key ----------------------------------------------------------------------------------

_PEM_END_RE = re.compile(r"-----? ?END (?:[A-Z0-9]{1,16} ){0,3}PRIVATE KEY(?: BLOCK)? ?----")
_PEM_BODY_RE = re.compile(r"[A-Za-z0-9+/]{16}")
_OTHER_PRIVATE_KEY_RE = re.compile(r"PuTTY-User-Key-File-[0-9]{1,2}: ?[a-z0-9-]{3,40}|AGE-SECRET-KEY-1[0-9A-Z]{58}")


def _find_private_keys(text: str, folded: str) -> Iterator[Span]:
    """The header alone is enough; when the footer follows, the whole block is the span.

    A complete block whose body holds no base64 at all (a run of one masking letter, "key omitted") is
    documentation.
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
    | sk-or-v1-[a-f0-9]{64}
    | sk-[a-f0-9]{32}(?![A-Za-z0-9_-])
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
    | (?:secret|ntn)_[A-Za-z0-9]{40,50}
    | sntry[su]_[A-Za-z0-9+/=_-]{40,300}
    | NRAK-[A-Z0-9]{27}
    | sbp_[a-f0-9]{40}
    | dckr_pat_[A-Za-z0-9_-]{27,40}
    | bkua_[a-f0-9]{40}
    | CCIPAT_[A-Za-z0-9]{22}_[a-f0-9]{40}
    | pscale_(?:tkn|pw|oauth)_[A-Za-z0-9_.-]{32,64}
    | tskey-[a-z]{1,12}-[A-Za-z0-9]{6,20}-[A-Za-z0-9]{20,64}
    | figd_[A-Za-z0-9_-]{40,64}
    | nfp_[A-Za-z0-9]{36,40}
    | CFPAT-[A-Za-z0-9_-]{43}
    | pul-[a-f0-9]{40}
    | rnd_[A-Za-z0-9]{32,40}
    | re_[A-Za-z0-9]{8}_[A-Za-z0-9]{24}
    | HRKU-[A-Za-z0-9_-]{40,80}
    | glc_[A-Za-z0-9+/=_-]{32,400}
    | ops_[A-Za-z0-9+/=_-]{40,800}
    | ATATT[A-Za-z0-9_=-]{60,300}
    | [A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_-]{60,90}
    | sl\.[A-Za-z0-9_-]{120,200}
    | (?:gsk|pplx|xai|fw|r8|tgp_v1|pa)[_-](?P<llm>[A-Za-z0-9_-]{20,160})
    | sk_[a-f0-9]{48}
    | [MNO][A-Za-z0-9]{23}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,38}
    """,
    re.VERBOSE,
)
_TELEGRAM_BOT_RE = re.compile(r"(?<![0-9])[0-9]{8,10}:AA[A-Za-z0-9_-]{33}(?![A-Za-z0-9_-])")
_TOKEN_BODIES = (
    "llm",
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
    openai, llm = match.group("openai"), match.group("llm")
    # "sk-", "pa-" or "fw_" also start ordinary words; real keys always mix case and digits.
    return all(
        body is None or _char_classes(body.replace("-", "").replace("_", "")) >= 3 for body in (openai, llm)
    ) and (openai is None or not _masked(openai))


# A key with no prefix of its own (Mistral, Cohere, Azure OpenAI, Deepgram) is known by its label: "API
# key: …", "our Cohere key is …", "API 키는 …", "API key 是 …", "APIキーは …", "のシークレットは …".
_LABELLED_KEY_RE = re.compile(
    r"(?:key|token|secret|credentials?|키|토큰|시크릿|密钥|密鑰|秘钥|秘鑰|令牌|キー|トークン|シークレット"
    r"|openai|azure[ \t]openai|anthropic|mistral|cohere|together|deepgram|groq|gemini|perplexity|voyage"
    r"|elevenlabs|assemblyai)[ \t]{0,3}"
    r"(?:[ \t](?:is|was)[ \t]|는|은|이|가|를|是|为|為|は|が|を|[:=\uff1a]|[ \t])[ \t]{0,3}"
    r"(?:[^\s\"'`]{1,6}[ \t]{1,3})?[\"'`]?"
    r"(?P<value>[A-Za-z0-9_-]{20,256})(?![A-Za-z0-9_-])",
    re.IGNORECASE,
)
_LONG_HEX_RE = re.compile(r"[0-9a-fA-F]{32,128}")


def _labelled_key(value: str) -> bool:
    """A value a label names as a key: noise, long hex, or capitals, small letters and digits mixed with no
    separator (a random key the noise measure reads as words now and then), not mostly capitalised words
    as a type's name is."""
    if _looks_random(value, min_length=20) or _LONG_HEX_RE.fullmatch(value):
        return True
    mixed = _char_classes(value) == 3 and value.isalnum() and _shannon_entropy(value) >= 4.0
    return mixed and sum(len(word) for word in _CAPITALIZED_RE.findall(value)) < len(value) / 2


def _find_api_tokens(text: str, folded: str) -> Iterator[Span]:
    for match in _API_TOKEN_RE.finditer(text):
        if _is_api_token(match, text):
            yield match.span()
    for match in _LABELLED_KEY_RE.finditer(text):
        value = match.group("value")
        if _labelled_key(value) and not _masked(value):
            yield match.span("value")
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


# --- high_entropy ---------------------------------------------------------------------------------

_SCHEME_CHARS = frozenset(string.ascii_letters + string.digits + "+.-")


def _scheme_start(text: str, colon: int) -> int | None:
    start = colon
    while start > 0 and colon - start < 32 and text[start - 1] in _SCHEME_CHARS:
        start -= 1
    while start < colon and not text[start].isalpha():
        start += 1
    return start if colon - start >= 2 else None


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


# The public members of a JSON Web Key (RFC 7517/7518: an RSA modulus and exponent, an EC point, a
# certificate chain or thumbprint) written as `"n": "…"`, `n = "…"` or `keys[0].n = "…"`: high-entropy,
# public. A private member ("d", "p", "q", "dp", "dq", "qi", "k") is not named here and stays a finding.
_PUBLIC_JWK_MEMBER_RE = re.compile(
    r"""(?:^|[^A-Za-z0-9_])["'(]?(?:n|e|x|y|x5c|x5t|x5t#S256)["')]?[ \t]{0,3}[:=][ \t]{0,3}\[?[ \t]{0,3}["']?$"""
    # a public key named as one, in the four languages: "modulus (n) = …", "public key: …", "公開鍵 …"
    r"""|(?i:modulus|exponent|public[ _-]?key|pubkey|jwks?)[^\n]{0,24}?(?:[ \t]is|[:=]|[ \t)])[ \t]{0,3}["']?$"""
    r"""|(?:공개[ \t]?키|公钥|公鑰|公開鍵|모듈러스|模数|模數|モジュラス)[^\n]{0,24}?[ \t:=\uff1a)][ \t]{0,3}["']?$"""
    # a thumbprint or fingerprint of a public key, a DNS domain-verification value: published on purpose
    r"""|(?:thumbprint|fingerprint)[^\n]{0,12}?(?:[ \t]is|[:=]|[ \t])[ \t]{0,3}["']?$|[a-z]-verification=$"""
    # a digest named as one: sha256=…, integrity: sha512-…, etag "…", checksum …
    r"""|(?i:sha-?(?:1|224|256|384|512)|md5|blake2b?|integrity|etag|digest|checksum|hash)"""
    r"""[ \t]{0,3}[=:\-]?[ \t]{0,3}["']?$"""
)


# Base64 of an image or a document (PNG, JPEG, GIF, PDF, RIFF/WebP, MP4) pasted without a data: URI.
_MEDIA_BASE64 = ("iVBORw0KGgo", "/9j/", "R0lGOD", "JVBERi0", "UklGR", "AAAAIGZ0eXA", "AAAAHGZ0eXA", "AAAAGGZ0eXA")


def _public_jwk_member(text: str, start: int) -> bool:
    return _PUBLIC_JWK_MEMBER_RE.search(text[max(0, start - 40) : start]) is not None


def _find_high_entropy(text: str, folded: str) -> Iterator[Span]:
    benign: list[Span] | None = None
    starts: list[int] = []
    for match in _TOKEN_RE.finditer(text):
        token = match.group()
        if token.startswith(_MEDIA_BASE64) or _public_jwk_member(text, match.start()):
            continue
        if not _looks_random(token.rstrip("="), min_length=24):
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
