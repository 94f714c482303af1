"""The detector of passwords by what names them: assignments, prose, command lines, CJK keywords.

Split from the other naming detectors (detectors_assignments.py) because a password is what a person
chose, not a random token: it needs its own judgement of what is a value and what is prose.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from engram_memory.engine.secrets.judgement import (
    Span,
    _is_concrete_value,
    _is_placeholder,
    _is_reference,
    _preceded_by,
    _unquote,
    _words,
)

# --- password_assignment --------------------------------------------------------------------------

# Runs on the lower-cased text; every keyword alternative opens with a literal.
_ASSIGNMENT_RE = re.compile(
    r"""
    (?P<keyword>
      pass(?:words?|wd|phrase) | pwd | pass | passwort | kennwort | mot[ ]de[ ]passe | contrase(?:ñ|n)a
      | senha | пароль
      | client[_ -]?secret | secret[_ -]?(?:access[_ -]?)?key | secrets?
      | api[_ -]?key | access[_ -]?key | private[_ -]?key | signing[_ -]?key | encryption[_ -]?key
      | access[_ -]?token | auth[_ -]?token | refresh[_ -]?token | api[_ -]?token | bearer[_ -]?token
      | session[_ -]?token | bot[_ -]?token | oauth[_ -]?token | personal[_ -]access[_ -]?token
      | credentials?
    )
    ["'\u2019]?[ \t]{0,3}
    (?::=|=>|==|->|→|[:=\uff1a]|(?<=['\u2019])s[ \t]{1,3}|[ \t](?:is|was)[ \t]{1,3}(?::[ \t]{0,3})?)
    [ \t]{0,3}
    (?P<value>"[^"\n]{1,256}"|'[^'\n]{1,256}'|`[^`\n]{1,256}`|[^\s"'`,;&)\]}>]{1,256})
    """,
    re.VERBOSE,
)
# Keywords that are also the end of other words ("bypass:", "compass =") count only as words of their own.
_SHORT_PASSWORD_WORDS = frozenset({"pass", "pwd"})
# Every keyword that names a password (not a key or a token): what a person chose, so a word with
# digits ("BlueHeron2024") is one too.
_PASSWORD_WORD_RE = re.compile(
    r"pass(?:words?|wd|phrase)|pwd|pass\b|passwort|kennwort|mot de passe|contrase(?:ñ|n)a|senha|пароль"
)
# curl -u user:password, git --user name:password (on the lower-cased text)
_USER_OPTION_RE = re.compile(r"""-(?:u|-user)[ \t=]{1,4}["']?[^\s:"'@]{1,64}:(?P<value>[^\s"']{1,128})""")
_XML_SECRET_RE = re.compile(
    r"<(?P<tag>(?i:password|passwd|secret|client_?secret|api_?key|access_?token|auth_?token))>"
    r"(?P<value>[^<\n]{1,256})</(?P=tag)>"
)


# A password named in prose: "the password for the deploy account is X", "passphrase of the vault: X",
# "password for grafana -> X".
_PROSE_PASSWORD_RE = re.compile(
    r"""
    (?:pass(?:words?|wd|phrase)|pwd)
    (?:[ \t]{1,3}[a-z0-9_.@-]{1,32}){0,6}
    [ \t]{0,3}
    (?P<separator>[ \t](?:is|was|to)[ \t]{1,3}(?::[ \t]{0,3})?|:=[ \t]{0,3}|[:=][ \t]{0,3}|(?:->|→|=>)[ \t]{0,3})
    (?:(?:still|now|currently|also|just|probably)[ \t]{1,3})?
    (?P<value>"[^"\n]{1,256}"|'[^'\n]{1,256}'|`[^`\n]{1,256}`|[^\s"'`,;)\]}>]{1,256})
    """,
    re.VERBOSE,
)
# "log in as admin with password X", "connect using the password X on the bastion"; the value must
# end the clause ("with password reset2 flow" names a flow).
_WITH_PASSWORD_RE = re.compile(
    r"(?:with|using|use|and)[ \t]{1,3}(?:the[ \t]{1,3})?(?:pass(?:words?|wd|phrase)|pwd)[ \t]{1,3}"
    r"(?P<value>\"[^\"\n]{1,256}\"|'[^'\n]{1,256}'|[^\s\"'`,;)\]}>]{1,256})"
    r"(?=[ \t]*(?:$|[\n.,;:!?)\]]|(?:and|or|on|for|to|at|in|from|then|but|via|over|if|when|as)\b|\(|-))"
)
# The same after any word, when the value is plainly a password a person made ("with password Qwer0608@
# until the migration lands").
_WITH_PASSWORD_ANYWHERE_RE = re.compile(
    r"(?:with|using|use|and)[ \t]{1,3}(?:the[ \t]{1,3})?(?:pass(?:words?|wd|phrase)|pwd)[ \t]{1,3}"
    r"(?P<value>[^\s\"'`,;)\]}>]{6,256})"
)
# "use X as the password", "the passphrase ... it's now X": the value before the word, or after "now".
_USE_AS_PASSWORD_RE = re.compile(
    r"\buse[ \t]{1,3}(?P<value>[^\s\"'`,;)\]}>]{6,128})[ \t]{1,3}as[ \t]{1,3}(?:the[ \t]{1,3})?"
    r"(?:pass(?:words?|wd|phrase)?|pwd|pw)\b"
)
_NOW_PASSWORD_RE = re.compile(
    r"(?:pass(?:words?|wd|phrase)|pwd|pw)\b[^\n.]{0,30}?\bnow[ \t]{1,3}(?P<value>[^\s\"'`,;)\]}>]{6,128})"
)
# "mysql on port 3306, password X": the word opening a clause, the value right after it.
_CLAUSE_PASSWORD_RE = re.compile(
    r"(?:^|[,;(]|\band)[ \t]{0,3}(?:the[ \t]{1,3})?(?:password|passwd|pwd|pw)[ \t]{1,3}"
    r"(?P<value>[^\s\"'`,;)\]}>]{6,128})"
)
# "deploy account / X", "user admin / X", "root / X": a login, a slash, the password.
_SLASH_PAIR_RE = re.compile(
    r"(?:creds?|credentials|account|user|login|root|admin|계정|账号|帳號|アカウント)[ \t]{0,3}(?:(?:→|->|:)[ \t]{0,3})?"
    r"(?:[^\s/:,;]{1,64}[ \t]{0,3})?/[ \t]{0,3}"
    r"(?P<value>[^\s\"'`,;)\]}>/]{6,128})"
)
# Words between a password's name and a colon that say the value is about the password, not it:
# "password reset: v2.3.1", "password hash: bcrypt12".
_ABOUT_THE_PASSWORD = _words(
    """
    hash hashing hashed reset resets policy policies length expiry expires rotation strength rule rules format
    algorithm encryption field manager prompt change changes hint complexity history requirement requirements
    version type mode minimum maximum min max age salt store storage check validation flow grant
    """
)
_LATIN_WORD_RE = re.compile(r"[a-z]+")
# mysql -u root -pS3cret (the password glued to -p; on the original text: -P is the port).
_MYSQL_PASSWORD_RE = re.compile(
    r"(?<![\w-])(?:mysql|mysqldump|mysqladmin|mariadb)\b[^\n|;&]{0,200}?[ \t]-p(?P<value>[^\s\"'`]{1,128})"
)
# A login written as "login: deploy / X" or "user = ops, X" (the password after the user name).
_LOGIN_PAIR_RE = re.compile(
    r"(?:log[ -]?in|user(?:[ _-]?name)?|account)[ \t]{0,3}[:=][ \t]{0,3}[^\s/:,;]{1,64}"
    r"[ \t]{0,3}[/,][ \t]{0,3}(?:pass(?:word)?[ \t]{0,3}[:=][ \t]{0,3})?(?P<value>[^\s\"'`,;)\]}>/]{1,128})"
)
# Korean, Chinese and Japanese names for a password, then a particle, copula or colon, then the value:
# "비밀번호는 X", "密码是 X", "パスワードは X", "암호: X". The value ends where the sentence goes back
# to CJK text ("X입니다", "X です").
_CJK_KEYWORDS = r"(?:비밀[ \t]?번호|비번|패스워드|암호|密码|密碼|口令|パスワード|パスフレーズ|パスコード|暗証番号)"
_CJK_PASSWORD_RE = re.compile(
    _CJK_KEYWORDS
    + r"[ \t]{0,3}(?:는|은|이|가|를|是|为|為|は|が|を|[:=\uff1a\uff1d])?[ \t]{0,3}(?:[:=\uff1a\uff1d][ \t]{0,3})?"
    # the value: no space, quote or separator, and no CJK letter or full-width form
    r"(?P<value>[^\s\"'`,;()\u3000-\u30ff\u3400-\u9fff\uac00-\ud7a3\uff00-\uffef]{1,256})"
)
# After an explicit colon the value runs to the next space and may hold CJK letters ("비밀번호: 사과나무123!").
_CJK_COLON_PASSWORD_RE = re.compile(
    _CJK_KEYWORDS + r"[ \t]{0,3}[:=\uff1a\uff1d][ \t]{0,3}(?P<value>[^\s\"'`,;()\u3000-\u303f\uff0c\uff1b]{1,256})"
)
# "creds for the portal are ops-team and X", "login details: user kiosk and X".
_CREDENTIALS_AND_RE = re.compile(
    r"(?:creds?|credentials|log[ -]?in(?:s| details)?)\b[^\n]{0,60}?[ \t]and[ \t]{1,3}"
    r"(?P<value>[^\s\"'`,;)\]}>]{6,128})"
)
# Korean, Chinese, Japanese: "비번 바꿨어요 → X", "密码已改为 X", "パスワードは『X』に変えました".
_CJK_VALUE = r"(?P<value>[^\s\"'`,;()\u3000-\u30ff\u3400-\u9fff\uac00-\ud7a3\uff00-\uffef]{6,256})"
_CJK_ARROW_RE = re.compile(_CJK_KEYWORDS + r"[^\n→]{0,20}?(?:→|->|=>)[ \t]{0,3}" + _CJK_VALUE)
_CJK_CHANGED_RE = re.compile(
    _CJK_KEYWORDS
    + r"[^\n]{0,12}?(?:改成了?|改为|改為|设为|設為|设置为|設置為|设置成|設置成|设成|設成|更改为|更改為|换成|換成)"
    + r"[ \t]{0,3}"
    + _CJK_VALUE
)
_CJK_QUOTED_RE = re.compile(_CJK_KEYWORDS + r"[^\n「『“\"']{0,12}[「『“\"'](?P<value>[^」』”\"'\n]{6,128})[」』”\"']")
_CJK_LETTER_RE = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7a3]")
# A passphrase of dictionary words ("falcon-maple-violet-saffron45"): four or more joined words.
_PASSPHRASE_RE = re.compile(r"[a-z]{2,24}[0-9]{0,6}(?:[-_.+][a-z]{2,24}[0-9]{0,6}){3,11}", re.IGNORECASE)


def _is_passphrase(value: str) -> bool:
    return bool(_PASSPHRASE_RE.fullmatch(value.strip("\"'`").rstrip(".,;:!?"))) and not _is_placeholder(value)


def _human_password(value: str) -> bool:
    """A value after a password's name that a person made: letters and digits, with a capital or a
    symbol ("BlueHeron2024", "Orbit-Lantern-55"), or a word and a number ("admin123")."""
    inner = _unquote(value).strip().rstrip(".,;:!?") if value[:1] not in "\"'`" else _unquote(value)
    if len(inner) < 6 or " " in inner or _is_placeholder(inner) or _is_reference(inner) or "/" in inner:
        return False
    letters = any(ch.isalpha() for ch in inner)
    digits = any(ch.isdigit() for ch in inner)
    if not (letters and digits):
        return False
    capital = any(ch.isupper() for ch in inner)
    symbol = any(not ch.isalnum() and ch not in "-_." for ch in inner)
    return capital or symbol or _WORD_AND_NUMBER_RE.fullmatch(inner) is not None


_WORD_AND_NUMBER_RE = re.compile(r"[a-z]{3,24}[0-9]{2,8}")


def _password_value(value: str) -> bool:
    inner = _unquote(value).strip().rstrip(".,;:!?")
    if inner.isalpha() and inner.islower():  # a word in any script ("oublié"), not a password
        return False
    return _is_concrete_value(value, min_length=6) or _is_passphrase(value) or _human_password(value)


# Any word that names a password, in the four languages; a value a person plainly chose near it, in any
# order and whatever words stand between ("My password for everything is basically X", "X는 비번").
_PASSWORD_WORD_ANYWHERE_RE = re.compile(
    r"pass(?:words?|wd|phrase|code)|(?<![a-z0-9])(?:pwd|pw|pword|pass|creds?|credentials|u/p)(?![a-z0-9])|"
    r"비밀[ \t]?번호|비번|패스워드|암호|密码|密碼|口令|パスワード|パスフレーズ|パスコード|暗証番号|パス(?![タポ])"
)
# Words that name a login, an account or an administrator rather than the password (and "p:" as in
# "u: ops  p: X", too short a word to be sure of): near one of them only a value that is a password
# whatever the words around it say counts (see _plainly_chosen).
_LOGIN_WORD_RE = re.compile(
    r"log[ -]?(?:in|on)|sign[ -]?(?:in|on)|(?<![a-z0-9])(?:admin(?:istrator)?|root|sudo|superuser|account"
    r"|user(?:name)?|unlock)(?![a-z0-9])|(?<![^\s])p(?=[ \t]{0,2}[:\uff1a][ \t]{0,3}[^\s])|"
    r"로그인|계정|아이디|관리자|어드민|루트|접속|"
    r"登录|登錄|登入|登陆|登陸|账号|賬號|帳號|账户|帳戶|用户|用戶|管理员|管理員|后台|後台|"
    r"ログイン|サインイン|アカウント|管理者|ユーザ|管理画面|ルート"
)
# The literal parts of both, for the scanner's cheap test of whether this detector need run at all.
NEEDLES: tuple[str, ...] = (
    *("pass", "pwd", "pw", "cred", "u/p", "p:", "p\uff1a", "log", "sign", "admin", "root", "sudo"),
    *("superuser", "account", "user", "unlock", "비밀", "번호", "비번", "패스워드", "암호", "로그인", "계정"),
    *("아이디", "관리자", "어드민", "루트", "접속", "密码", "密碼", "口令", "登录", "登錄", "登入", "登陆", "登陸"),
    *("账号", "賬號", "帳號", "账户", "帳戶", "用户", "用戶", "管理员", "管理員", "后台", "後台", "パス", "暗証"),
    *("ログイン", "サインイン", "アカウント", "管理者", "ユーザ", "管理画面", "ルート"),
)
_NEAR = 60
# Past this many words of each kind in one text the rest are not looked around (a megabyte of them stays fast).
_NEAR_WORDS = 64
_NEAR_STOPS = "\\s\"'`,;()\\[\\]{}<>=\u300c\u300d\u300e\u300f\u201c\u201d\uff08\uff09\u3001\u3002\uff0c\uff1b\uff1a"
_NEAR_TOKEN_RE = re.compile(f"[^{_NEAR_STOPS}]{{6,128}}")
# The same tokens cut where Korean, Chinese or Japanese letters begin ("密码是X", "X입니다").
_NEAR_LATIN_TOKEN_RE = re.compile(f"[^{_NEAR_STOPS}\u3040-\u30ff\u3400-\u9fff\uac00-\ud7a3\uff00-\uffef]{{6,128}}")
_BARE_VALUE_AFTER_RE = re.compile(r"[ \t]*\S{6,128}[ \t]*(?:\n.*)?", re.DOTALL)
_SENTENCE_END_RE = re.compile("[.!?\u3002\uff01\uff1f\n]\\s")
_PERCENT_ESCAPE_RE = re.compile(r"%[0-9A-F]{2}")
_ADDRESS_RE = re.compile(r"[A-Za-z0-9._+-]{2,64}@[A-Za-z0-9-]{1,63}(?:\.[A-Za-z0-9-]{1,63}){0,8}(?::[0-9]{1,5})?")
_NOT_A_PASSWORD_SYMBOL = frozenset("-_.:/")


def _cue_words(folded: str) -> Iterator[tuple[re.Match[str], bool]]:
    """Every word naming a password (True) or a login (False), in the order they occur."""
    words = [(m, True) for m, _ in zip(_PASSWORD_WORD_ANYWHERE_RE.finditer(folded), range(_NEAR_WORDS), strict=False)]
    words += [(m, False) for m, _ in zip(_LOGIN_WORD_RE.finditer(folded), range(_NEAR_WORDS), strict=False)]
    yield from sorted(words, key=lambda pair: pair[0].start())


def _near_password_words(text: str, folded: str) -> Iterator[Span]:
    """A password a person chose, in the same sentence as a word that names a password or a login.

    Near a password's name a word with digits or a capital counts, unless the words around say the value
    is about the password (its hash, policy, length); near a login's name, and whatever the words around,
    only a value that is plainly a password (_plainly_chosen).
    """
    for word, names_password in _cue_words(folded):
        start, end = max(0, word.start() - _NEAR), min(len(text), word.end() + _NEAR)
        before = [m.end() for m in _SENTENCE_END_RE.finditer(text, start, word.start())]
        after = _SENTENCE_END_RE.search(text, word.end(), end)
        start = before[-1] if before else start
        if after and not _BARE_VALUE_AFTER_RE.fullmatch(text, after.end(), end):
            end = after.start() + 1  # "…password. X": a bare value alone after the sentence still counts
        about = not _ABOUT_THE_PASSWORD.isdisjoint(_LATIN_WORD_RE.findall(folded[start:end]))
        first = _NEAR_TOKEN_RE.search(text, word.end(), end)
        if first is not None and first.group()[:1] in "$!{%<" and first.start() - word.end() <= 4:
            continue  # "password: $DB_PASSWORD", "password: !vault …": the password is kept elsewhere
        for pattern in (_NEAR_TOKEN_RE, _NEAR_LATIN_TOKEN_RE):
            for token in pattern.finditer(text, start, end):
                if token.start() < word.end() and token.end() > word.start():
                    continue  # the word itself
                value = token.group().rstrip(".,;:!?")
                chosen = _plainly_chosen(token.group().rstrip(".,;:")) or _plainly_chosen(value)
                made = _human_password(value) or _is_passphrase(value) or _random_password(value)
                if chosen or (names_password and not about and made):
                    yield token.start(), token.start() + len(value)


def _plainly_chosen(value: str) -> bool:
    """A password whatever the words around it say: letters, digits and a symbol ("Harbor2096@",
    "P@ss3664#", "admin35569!") or a passphrase carrying digits ("cedar-harbor-ember-lantern63"); never a
    path, an address, a handle, a flag, markup, a percent-escaped string, a placeholder or a reference."""
    if not 7 <= len(value) <= 64 or value[:1] == "@" or value.startswith("--") or "/" in value:
        return False
    if (value[0] == value[-1] and not value[0].isalnum()) or _PERCENT_ESCAPE_RE.search(value):
        return False  # |markup|, **bold**, first%2Csecond
    if _ADDRESS_RE.fullmatch(value) or _is_placeholder(value) or _is_reference(value):
        return False
    letters = any(ch.isascii() and ch.isalpha() for ch in value)
    digits = any(ch.isdigit() for ch in value)
    if _is_passphrase(value):
        return digits
    return letters and digits and any(not ch.isalnum() and ch not in _NOT_A_PASSWORD_SYMBOL for ch in value)


def _random_password(value: str) -> bool:
    """A generated password: ten characters or more, capitals, small letters and symbols mixed; not a path,
    a variable, a YAML tag or a placeholder."""
    if len(value) < 10 or "/" in value or value[:1] in "$!{%<" or _is_placeholder(value) or _is_reference(value):
        return False
    symbols = any(not ch.isalnum() and ch not in "-_." for ch in value)
    return symbols and any(ch.isupper() for ch in value) and any(ch.islower() for ch in value)


def _find_password_assignments(text: str, folded: str) -> Iterator[Span]:
    yield from _keyword_assignments(text, folded)
    yield from _near_password_words(text, folded)
    yield from _named_passwords(text, folded)
    yield from _command_line_passwords(text, folded)
    if "<" in text:
        for match in _XML_SECRET_RE.finditer(text):
            if _is_concrete_value('"' + match.group("value") + '"', min_length=6):
                yield match.span()


def _keyword_assignments(text: str, folded: str) -> Iterator[Span]:
    for match in _ASSIGNMENT_RE.finditer(folded):
        # arn:aws:secretsmanager:...:secret:name is an address, not an assignment
        if _preceded_by(text, match.start(), frozenset(":/")):
            continue
        keyword = match.group("keyword")
        if keyword in _SHORT_PASSWORD_WORDS and match.start() > 0 and folded[match.start() - 1].isalnum():
            continue
        value = text[match.start("value") : match.end("value")]
        if _PASSWORD_WORD_RE.fullmatch(keyword) is not None:
            if _password_value(value):
                yield match.span()
        elif _is_concrete_value(value, min_length=6):
            yield match.span()


def _command_line_passwords(text: str, folded: str) -> Iterator[Span]:
    for match in _USER_OPTION_RE.finditer(folded):
        if match.start() > 0 and not text[match.start() - 1].isspace():
            continue
        if _is_concrete_value(text[match.start("value") : match.end("value")], min_length=6):
            yield match.span()
    if "-p" in text:
        for match in _MYSQL_PASSWORD_RE.finditer(text):
            if _password_value(match.group("value")):
                yield match.span()


def _named_passwords(text: str, folded: str) -> Iterator[Span]:
    """Passwords in prose (English, Korean, Chinese, Japanese) and after a login name."""
    for pattern in (_PROSE_PASSWORD_RE, _WITH_PASSWORD_RE, _LOGIN_PAIR_RE, _CJK_PASSWORD_RE):
        for match in pattern.finditer(folded):
            if pattern is _LOGIN_PAIR_RE and match.start() > 0 and folded[match.start() - 1].isalnum():
                continue  # "relogin:", "superuser=": another word
            value = text[match.start("value") : match.end("value")]
            named = folded[match.start() : match.start("value")]
            # "password reset: v2.3.1" is about the password; "password was reset to X" names it.
            if (
                pattern is _PROSE_PASSWORD_RE
                and match.group("separator").strip() not in ("to", "is", "was")
                and not _ABOUT_THE_PASSWORD.isdisjoint(_LATIN_WORD_RE.findall(named))
            ):
                continue
            if pattern is _LOGIN_PAIR_RE:
                if _is_concrete_value(value, min_length=6):
                    yield match.span()
            elif _password_value(value):
                yield match.span()
    # After a bare "password" only what is plainly a password counts ("with password reset2 flow" names a
    # flow); after a login, a slash or a CJK "changed to", any password-like value does.
    for pattern, plainly in (
        (_WITH_PASSWORD_ANYWHERE_RE, True),
        (_USE_AS_PASSWORD_RE, True),
        (_NOW_PASSWORD_RE, True),
        (_CLAUSE_PASSWORD_RE, True),
        (_SLASH_PAIR_RE, False),
        (_CREDENTIALS_AND_RE, False),
        (_CJK_ARROW_RE, False),
        (_CJK_CHANGED_RE, False),
        (_CJK_QUOTED_RE, False),
    ):
        for match in pattern.finditer(folded):
            value = text[match.start("value") : match.end("value")]
            if _human_password(value) or _is_passphrase(value) if plainly else _password_value(value):
                yield match.span()
    for match in _CJK_COLON_PASSWORD_RE.finditer(folded):
        value = text[match.start("value") : match.end("value")]
        # CJK letters in it: the value must still be mostly a password's characters ("사과나무123!"),
        # not a sentence ("8자리입니다").
        if (
            _CJK_LETTER_RE.search(value)
            and sum(not _CJK_LETTER_RE.match(ch) for ch in value) >= 3
            and _is_concrete_value(value, min_length=6)
            and any(ch.isdigit() or not ch.isalnum() for ch in value)
        ):
            yield match.span()
