"""A labelled corpus for the secret detector: synthetic secrets of every SPEC §10 kind, and look-alikes.

Every text is generated from templates and seeded random values, so nothing real is ever stored and
the corpus is the same on every machine. Positives: private keys, cloud and SaaS token shapes, JWTs,
bearer headers, URL and connection-string credentials (with reserved characters), `.env` lines,
session cookies, high-entropy tokens, and passwords in English, Korean, Chinese and Japanese prose.
Negatives: UUIDs, commit SHAs, digests, data-URI images, placeholders and templates, public keys,
ids, URLs without credentials, and ordinary prose in four languages, much of it about passwords.
"""

from __future__ import annotations

import base64
import json
import random
import string
import uuid
from collections.abc import Callable
from dataclasses import dataclass

ALNUM = string.ascii_letters + string.digits
LOWER_ALNUM = string.ascii_lowercase + string.digits
HEX = "0123456789abcdef"
B64 = ALNUM + "+/"
SYMBOLS = "!#$%&*+-=?@^_~"
WORDS = (
    "falcon",
    "maple",
    "violet",
    "saffron",
    "orbit",
    "quartz",
    "meadow",
    "lantern",
    "comet",
    "harbor",
    "granite",
    "willow",
    "cobalt",
    "ember",
    "juniper",
    "tundra",
    "nectar",
    "pixel",
    "ridge",
    "summit",
    "velvet",
    "glacier",
    "canyon",
    "thistle",
    "walnut",
    "zephyr",
)


@dataclass(frozen=True, slots=True)
class Sample:
    text: str
    secret: bool
    kind: str


def _random(rng: random.Random, alphabet: str, length: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(length))


def password(rng: random.Random) -> str:
    """A human-made password: a word, a capital, digits and a symbol, in some order."""
    word = rng.choice(WORDS)
    parts = [word.capitalize(), str(rng.randint(10, 9999)), rng.choice(SYMBOLS), _random(rng, ALNUM, rng.randint(2, 5))]
    rng.shuffle(parts)
    return "".join(parts)


def simple_password(rng: random.Random) -> str:
    """What people often choose instead: two capitalised words and a year, or a word and a number."""
    first, second = rng.sample(WORDS, 2)
    if rng.random() < 0.5:
        return f"{first.capitalize()}{second.capitalize()}{rng.randint(1990, 2030)}"
    return f"{first}{rng.randint(10, 9999)}"


HANGUL_WORDS = ("사과나무", "바다", "고양이", "하늘빛", "별자리")


def passphrase(rng: random.Random) -> str:
    words = rng.sample(WORDS, rng.randint(4, 5))
    return rng.choice("-_.").join(words) + str(rng.randint(1, 99))


def _pem(rng: random.Random, label: str) -> str:
    body = "\n".join(_random(rng, B64, 64) for _ in range(rng.randint(4, 8)))
    dashes = "-" * 5
    return f"{dashes}BEGIN {label}{dashes}\n{body}\n{dashes}END {label}{dashes}"


def _jwt(rng: random.Random) -> str:
    def part(value: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")

    header = part({"alg": "HS256", "typ": "JWT"})
    claims = part({"sub": _random(rng, LOWER_ALNUM, 8), "exp": rng.randint(1_700_000_000, 1_900_000_000)})
    return f"{header}.{claims}.{_random(rng, ALNUM + '-_', 43)}"


Template = Callable[[random.Random], str]

SECRETS: dict[str, list[Template]] = {
    "private_key": [
        lambda r: _pem(r, "RSA PRIVATE" + " KEY"),
        lambda r: "deploy key:\n" + _pem(r, "OPENSSH PRIVATE" + " KEY"),
        lambda r: _pem(r, "EC PRIVATE" + " KEY") + "\nkeep it on the bastion only",
    ],
    "cloud_key": [
        lambda r: "aws_access_key_id = AKIA" + _random(r, string.ascii_uppercase + "234567", 16),
        lambda r: "The CI user has key ASIA" + _random(r, string.ascii_uppercase + "234567", 16) + " for now",
        lambda r: "maps key AIza" + _random(r, ALNUM + "-_", 35),
        lambda r: "aws_secret_access_key=" + _random(r, B64, 40),
    ],
    "api_token": [
        lambda r: "use ghp_" + _random(r, ALNUM, 36) + " for the release job",
        lambda r: "github_pat_" + _random(r, ALNUM, 22) + "_" + _random(r, ALNUM, 59),
        lambda r: (
            "slack bot token xoxb-"
            + "-".join(_random(r, string.digits, 12) for _ in range(2))
            + "-"
            + _random(r, ALNUM, 24)
        ),
        lambda r: "OPENAI key sk-proj-" + _random(r, ALNUM + "-_", 48),
        lambda r: "stripe sk_live_" + _random(r, ALNUM, 24),
        lambda r: "gitlab token glpat-" + _random(r, ALNUM + "-_", 20),
        lambda r: "npm_" + _random(r, ALNUM, 36) + " publishes the package",
        lambda r: "SendGrid SG." + _random(r, ALNUM + "-_", 22) + "." + _random(r, ALNUM + "-_", 43),
        lambda r: "vault token hvs." + _random(r, ALNUM + "-_", 90),
    ],
    "jwt": [
        lambda r: "session token " + _jwt(r),
        lambda r: '{"id_token": "' + _jwt(r) + '"}',
    ],
    "bearer_token": [
        lambda r: "Authorization: Bearer " + _random(r, ALNUM + "-._~+/", 40),
        lambda r: "curl -H 'Authorization: Bearer " + _random(r, ALNUM, 32) + "' https://api.internal/v1",
    ],
    "url_credentials": [
        lambda r: f"postgres://app:{password(r)}@db.internal:5432/app",
        lambda r: f"mysql://root:{_random(r, ALNUM, 8)}#{_random(r, ALNUM, 6)}@10.0.0.{r.randint(2, 250)}/shop",
        lambda r: f"https://deploy:{_random(r, ALNUM, 7)}?{_random(r, ALNUM, 6)}@git.internal/org/repo.git",
        lambda r: f"redis://:{_random(r, ALNUM, 24)}@cache.internal:6379/0",
        lambda r: f"amqp://svc:{_random(r, ALNUM, 10)}%21{_random(r, ALNUM, 4)}@mq.internal/vhost",
    ],
    "connection_string": [
        lambda r: f"Server=db.internal;Database=shop;User Id=app;Password={password(r)};",
        lambda r: f"host=db.internal port=5432 dbname=app user=app password={_random(r, ALNUM, 16)}",
    ],
    "password_assignment": [
        lambda r: f'password = "{password(r)}"',
        lambda r: f"db:\n  passwd: {password(r)}\n",
        lambda r: f"the password for the staging admin account is {password(r)}",
        lambda r: f"Our shared vault passphrase: {passphrase(r)}",
        lambda r: f"password={passphrase(r)}",
        lambda r: f"login: deploy / {password(r)}",
        lambda r: f"username = ops, {password(r)}",
        lambda r: f"client_secret: {_random(r, ALNUM, 32)}",
        lambda r: f"The wifi password was {password(r)} until Friday.",
        lambda r: f"curl -u admin:{password(r)} https://ci.internal/api",
        lambda r: f"서버 비밀번호는 {password(r)} 입니다.",
        lambda r: f"관리자 계정 암호: {password(r)}",
        lambda r: f"VPN 패스워드는 {password(r)}로 바꿨어요.",
        lambda r: f"测试环境的密码是{password(r)}，请勿外传。",
        lambda r: f"數據庫密碼：{password(r)}",
        lambda r: f"路由器口令为 {password(r)}",
        lambda r: f"本番のパスワードは{password(r)}です。",
        lambda r: f"共有アカウントのパスワード: {password(r)}",
        lambda r: f"pwd: {password(r)}",
        lambda r: f"WiFi password: {simple_password(r)}",
        lambda r: f"log in as admin with password {simple_password(r)} on the bastion",
        lambda r: f"password for grafana -> {password(r)}",
        lambda r: f"my password's '{password(r)}'",
        lambda r: f"mysql -u root -p{password(r)} shop",
        lambda r: f"비밀번호: {r.choice(HANGUL_WORDS)}{r.randint(10, 9999)}{r.choice(SYMBOLS)}",
        lambda r: f"비번은 {password(r)} 입니다",
        lambda r: f"ドアのパスコード: {password(r)}",
        lambda r: f"Passwort: {password(r)}",
        lambda r: f"mot de passe : {password(r)}",
        lambda r: f"contraseña: {password(r)}",
    ],
    "env_assignment": [
        lambda r: f"DB_PASSWORD={password(r)}",
        lambda r: f"export STRIPE_SECRET_KEY={_random(r, ALNUM, 32)}",
        lambda r: f"# prod\nAPI_TOKEN={_random(r, ALNUM, 40)}\nDEBUG=false",
    ],
    "session_cookie": [
        lambda r: f"Cookie: sessionid={_random(r, LOWER_ALNUM, 32)}; csrftoken={_random(r, ALNUM, 32)}",
        lambda r: f"Set-Cookie: session={_random(r, ALNUM + '-_', 48)}; HttpOnly; Secure",
    ],
    "high_entropy": [
        lambda r: "the signing secret is " + _random(r, ALNUM + "+/", 44),
        lambda r: "token: " + _random(r, ALNUM + "-_", 40),
    ],
}

# Lines that name a password but hold none (also the detector's unit negatives).
PASSWORD_LOOKALIKES = [
    "bypass: enabled",
    "pass: 3 of 4 tests",
    "pwd: /home/ops/app2",
    "password: scram-sha-256",
    "log in with password authentication",
    "with password reset2 flow",
    "password reset: v2.3.1",
    "password hash: bcrypt12",
    "mysql -h db -P 3306 -u app -p",
    "psql -p 5432 -U app",
    "비밀번호: 8자리입니다",
    "비번 바꿨어",
    "パスコード: 6桁の数字",
    "密码：至少8位",
    "mot de passe : oublié",
]

_PROSE = [
    "The password must be rotated every 90 days.",
    "Reset the password from the account page; the link expires in an hour.",
    "the password for the account is expired",
    "The password policy is min-length-12 with one symbol.",
    "Set the API key in the vault, never in the repository.",
    "Rotate the signing key every quarter; its id is published in the JWKS.",
    "The bearer token is checked on every request.",
    "login: alice / staging",
    "user: admin / readonly, both on the new cluster",
    "Session cookies are HttpOnly and Secure.",
    "비밀번호를 변경했습니다.",
    "비밀번호는 8자 이상이어야 하고 특수문자를 포함해야 합니다.",
    "암호화 키는 분기마다 교체한다.",
    "패스워드 관리자는 팀 공용으로 쓴다.",
    "密码长度至少为12位。",
    "忘记密码时请联系支持团队。",
    "請定期更換密碼，不要與他人共用。",
    "口令策略由安全团队负责。",
    "パスワードは8文字以上にしてください。",
    "パスワードを忘れた場合はサポートに連絡してください。",
    "暗証番号は窓口で再発行できます。",
    "Caroline: I went to a support group yesterday and it was so powerful.",
    "Melanie: We're thinking of going camping in the mountains next month.",
    "운영팀은 데이터베이스를 매일 밤 클라우드에 백업한다.",
    "运维团队每天晚上把数据库备份到云端存储。",
    "運用チームは毎晩データベースをクラウドにバックアップします。",
    *PASSWORD_LOOKALIKES,
]

LOOKALIKES: dict[str, list[Template]] = {
    "uuid": [lambda r: f"request {uuid.UUID(int=r.getrandbits(128))} failed twice"],
    "git_sha": [
        lambda r: f"fixed in commit {_random(r, HEX, 40)}",
        lambda r: f"see {_random(r, HEX, 7)} for the change",
    ],
    "digest": [
        lambda r: f"sha256:{_random(r, HEX, 64)}",
        lambda r: f"integrity sha512-{base64.b64encode(r.randbytes(64)).decode()}",
    ],
    "data_uri": [
        lambda r: "![chart](data:image/png;base64," + base64.b64encode(r.randbytes(r.randint(200, 900))).decode() + ")",
        lambda r: '<img src="data:image/jpeg;base64,' + base64.b64encode(r.randbytes(400)).decode() + '">',
    ],
    "placeholder": [
        lambda r: "password: <your-password>",
        lambda r: "API_KEY=changeme",
        lambda r: "DB_PASSWORD=${DB_PASSWORD}",
        lambda r: 'password = "{{ vault_password }}"',
        lambda r: "postgres://user:password@localhost/db",
        lambda r: "Authorization: Bearer <token>",
        lambda r: "secret: REDACTED",
        lambda r: "비밀번호: ********",
        lambda r: "密码：<在此填写>",
    ],
    "public_key": [
        lambda r: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI" + _random(r, B64, 43) + " ops@bastion",
        lambda r: _pem(r, "PUBLIC KEY"),
        lambda r: _pem(r, "CERTIFICATE"),
    ],
    "ids": [
        lambda r: f"record mem_{_random(r, 'abcdefghijklmnopqrstuvwxyz234567', 26)} was admitted",
        lambda r: f"subnet-{_random(r, HEX, 17)} in vpc-{_random(r, HEX, 17)}",
        lambda r: f"order #{r.randint(10_000, 99_999)} shipped on 2026-0{r.randint(1, 9)}-1{r.randint(0, 9)}",
    ],
    "urls": [
        lambda r: f"https://docs.example.com:8443/guide?page={r.randint(1, 9)}#install",
        lambda r: f"ssh://git@github.com/org/repo{r.randint(1, 99)}.git",
        lambda r: "mailto:support@example.com",
    ],
    "versions": [lambda r: f"upgraded to v{r.randint(1, 9)}.{r.randint(0, 30)}.{r.randint(0, 99)}-rc{r.randint(1, 5)}"],
    "prose": [lambda r, line=line: line for line in _PROSE],  # type: ignore[misc]
}


def corpus(per_template: int, seed: int = 14) -> list[Sample]:
    rng = random.Random(seed)
    samples = []
    for kind, templates in SECRETS.items():
        samples += [Sample(t(rng), True, kind) for t in templates for _ in range(per_template)]
    for kind, templates in LOOKALIKES.items():
        repeat = 1 if kind == "prose" else per_template
        samples += [Sample(t(rng), False, kind) for t in templates for _ in range(repeat)]
    return samples
