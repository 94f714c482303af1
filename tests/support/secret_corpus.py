# ruff: noqa: RUF001 - CJK punctuation on purpose; random values here are test data, not secrets
"""A labelled corpus for the secret detector, built from kinds of secret and ways people write them.

Secrets come from vendors' documented token formats (prefix, alphabet, length) filled with random
characters, and from the ways people state passwords in English, Korean, Chinese and Japanese; the
benign texts are what a team's notes hold that looks like them (public keys and JWKS moduli, digests,
ids, placeholders, policy prose). Parts that share no sentence template and no random stream: `tune`
(what the detectors were widened against), `seen` and `held` (see `corpus`). Each kind has its own
templates in each part, so a held part tests the kind, not the sentences.
"""

from __future__ import annotations

import base64
import random
import string
from collections.abc import Callable
from dataclasses import dataclass

ALNUM = string.ascii_letters + string.digits
UPPER_ALNUM = string.ascii_uppercase + string.digits
HEX = "0123456789abcdef"
B64URL = ALNUM + "-_"

KINDS = ("password_prose", "saas_token", "url_credentials", "llm_api_key", "public_key", "benign")


@dataclass(frozen=True)
class Sample:
    kind: str
    text: str
    secret: bool


def _r(rng: random.Random, alphabet: str, n: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


# -- values ---------------------------------------------------------------------------------------

SAAS: list[Callable[[random.Random], str]] = [
    lambda r: "ghp_" + _r(r, ALNUM, 36),
    lambda r: "gho_" + _r(r, ALNUM, 36),
    lambda r: "github_pat_" + _r(r, ALNUM, 22) + "_" + _r(r, ALNUM, 59),
    lambda r: "glpat-" + _r(r, B64URL, 20),
    lambda r: "xoxb-" + _r(r, string.digits, 12) + "-" + _r(r, string.digits, 13) + "-" + _r(r, ALNUM, 24),
    lambda r: (
        "xoxp-"
        + _r(r, string.digits, 12)
        + "-"
        + _r(r, string.digits, 12)
        + "-"
        + _r(r, string.digits, 13)
        + "-"
        + _r(r, HEX, 32)
    ),
    lambda r: "sk_live_" + _r(r, ALNUM, 99),
    lambda r: "rk_live_" + _r(r, ALNUM, 99),
    lambda r: "SK" + _r(r, HEX, 32),
    lambda r: "SG." + _r(r, B64URL, 22) + "." + _r(r, B64URL, 43),
    lambda r: "npm_" + _r(r, ALNUM, 36),
    lambda r: "pypi-AgEIcHlwaS5vcmc" + _r(r, B64URL, 70),
    lambda r: "shpat_" + _r(r, HEX, 32),
    lambda r: "dop_v1_" + _r(r, HEX, 64),
    lambda r: "dapi" + _r(r, HEX, 32),
    lambda r: "hvs." + _r(r, B64URL, 90),
    lambda r: "glsa_" + _r(r, ALNUM, 32) + "_" + _r(r, HEX, 8),
    lambda r: "lin_api_" + _r(r, ALNUM, 40),
    lambda r: "PMAK-" + _r(r, HEX, 24) + "-" + _r(r, HEX, 34),
    lambda r: "dp.pt." + _r(r, ALNUM, 43),
    lambda r: "key-" + _r(r, HEX, 32),
    lambda r: "ATATT3xFfGF0" + _r(r, B64URL, 170) + "=" + _r(r, HEX.upper(), 8),
    lambda r: "secret_" + _r(r, ALNUM, 43),
    lambda r: "ntn_" + _r(r, ALNUM, 46),
    lambda r: r.choice("MNO") + _r(r, ALNUM, 23) + "." + _r(r, B64URL, 6) + "." + _r(r, B64URL, 27),
    lambda r: _r(r, string.digits, 10) + ":AA" + _r(r, B64URL, 33),
    lambda r: "sntrys_" + _r(r, ALNUM, 100),
    lambda r: "sntryu_" + _r(r, HEX, 64),
    lambda r: "NRAK-" + _r(r, UPPER_ALNUM, 27),
    lambda r: "sbp_" + _r(r, HEX, 40),
    lambda r: "pscale_tkn_" + _r(r, B64URL, 43),
    lambda r: "dckr_pat_" + _r(r, B64URL, 27),
    lambda r: "tskey-auth-" + _r(r, ALNUM, 12) + "-" + _r(r, ALNUM, 32),
    lambda r: "figd_" + _r(r, B64URL, 40),
    lambda r: "sl." + _r(r, B64URL, 135),
    lambda r: "nfp_" + _r(r, ALNUM, 36),
    lambda r: "bkua_" + _r(r, HEX, 40),
    lambda r: "CCIPAT_" + _r(r, ALNUM, 22) + "_" + _r(r, HEX, 40),
    lambda r: _r(r, ALNUM, 14) + ".atlasv1." + _r(r, ALNUM, 67),
    lambda r: "CFPAT-" + _r(r, B64URL, 43),
    lambda r: "pul-" + _r(r, HEX, 40),
    lambda r: "rnd_" + _r(r, ALNUM, 32),
    lambda r: "re_" + _r(r, ALNUM, 8) + "_" + _r(r, ALNUM, 24),
    lambda r: "HRKU-AA" + _r(r, B64URL, 58),
    lambda r: "glc_" + _r(r, B64URL, 80),
    lambda r: "ops_" + _r(r, B64URL, 120),
]

LLM: list[Callable[[random.Random], str]] = [
    lambda r: "sk-proj-" + _r(r, B64URL, 156),
    lambda r: "sk-" + _r(r, ALNUM, 48),
    lambda r: "sk-svcacct-" + _r(r, B64URL, 156),
    lambda r: "sk-ant-api03-" + _r(r, B64URL, 93) + "AA",
    lambda r: "sk-ant-admin01-" + _r(r, B64URL, 93) + "AA",
    lambda r: "AIza" + _r(r, B64URL, 35),
    lambda r: "gsk_" + _r(r, ALNUM, 52),
    lambda r: "pplx-" + _r(r, ALNUM, 48),
    lambda r: "xai-" + _r(r, ALNUM, 80),
    lambda r: "sk-or-v1-" + _r(r, HEX, 64),
    lambda r: "sk-" + _r(r, HEX, 32),
    lambda r: "fw_" + _r(r, ALNUM, 24),
    lambda r: "r8_" + _r(r, ALNUM, 37),
    lambda r: "hf_" + _r(r, ALNUM, 34),
    lambda r: "pa-" + _r(r, B64URL, 43),
    lambda r: "sk_" + _r(r, HEX, 48),
    lambda r: "tgp_v1_" + _r(r, B64URL, 43),
]
# Keys with no prefix of their own: only their label says what they are.
LLM_UNPREFIXED: list[tuple[str, Callable[[random.Random], str]]] = [
    ("Mistral", lambda r: _r(r, ALNUM, 32)),
    ("Cohere", lambda r: _r(r, ALNUM, 40)),
    ("Azure OpenAI", lambda r: _r(r, HEX, 32)),
    ("Together", lambda r: _r(r, HEX, 64)),
    ("Deepgram", lambda r: _r(r, HEX, 40)),
]

_WORDS = [
    "river",
    "maple",
    "orbit",
    "falcon",
    "lantern",
    "copper",
    "harbor",
    "velvet",
    "cedar",
    "saffron",
    "tundra",
    "comet",
    "quartz",
    "willow",
    "ember",
]
_NAMES = ["minsu", "jiyeon", "wei", "lihua", "haruto", "yuki", "david", "sarah", "admin", "root", "deploy", "ops"]


def password(rng: random.Random) -> str:
    """A password a person chose, in one of the ways people choose them."""
    style = rng.randrange(6)
    if style == 0:
        return rng.choice(_WORDS).capitalize() + str(rng.randrange(10, 9999)) + rng.choice("!@#$%&*?")
    if style == 1:
        return _r(rng, ALNUM + "!@#$%^&*", rng.randrange(10, 20))
    if style == 2:
        return "-".join(rng.sample(_WORDS, 4)) + str(rng.randrange(10, 99))
    if style == 3:
        return rng.choice(_NAMES) + str(rng.randrange(1000, 99999)) + rng.choice(["!", "#", "@", ""])
    if style == 4:
        return rng.choice(["Qwer", "Asdf", "Zxcv", "P@ss", "Pa$$"]) + _r(rng, string.digits, 4) + rng.choice("!@#")
    return rng.choice(_WORDS) + rng.choice(_WORDS).capitalize() + _r(rng, string.digits, 3) + rng.choice("!$%")


def jwks_modulus(rng: random.Random) -> str:
    return base64.urlsafe_b64encode(rng.randbytes(256)).decode().rstrip("=")


# -- templates, by part ---------------------------------------------------------------------------

PASSWORD_TEMPLATES = {
    "tune": [
        "The password for the staging database is {p}",
        "Log in as admin with password {p} until the SSO migration lands.",
        "wifi password: {p}",
        "deploy account / {p} (rotate after the release)",
        "스테이징 DB 비밀번호는 {p} 입니다.",
        "관리자 계정 암호: {p}",
        "测试环境数据库的密码是 {p}",
        "管理员密码：{p}",
        "ステージングDBのパスワードは {p} です。",
        "管理者パスワード：{p}",
        "I set the admin password to {p} for the demo.",
        "pwd of the build agent := {p}",
        "login details for the kiosk: user kiosk and {p}",
        "DB 비번 알려드려요 -> {p}",
        "测试账号的密码已改为 {p}",
        "ステージングのパスワードは『{p}』に変えました",
        "the staging password got rotated to {p} yesterday",
        "mysql on port 3306, password {p}",
        "we'll use {p} as the password for the demo tenant",
        "I reset the passphrase; it's now {p}",
        "vendor creds -> support / {p}",
        '초기 비밀번호는 "{p}" 입니다',
        "把数据库口令设置成 {p} 吧",
        "the wiki password is currently {p} for everyone",
    ],
    "seen": [
        "Heads up: I changed the root password to {p} this morning.",
        "You can reach the grafana box, the pass is {p}",
        "pwd for the shared jenkins user = {p}",
        "creds for the vendor portal are ops-team and {p}",
        "서버 비번 바꿨어요 → {p}",
        "공유 계정 비밀번호를 {p}로 변경했습니다.",
        "VPN 密码改成了 {p}，记得更新。",
        "共享账号的口令为 {p}",
        "共用アカウントのパスワードを {p} に変更しました。",
        "VPNのパスワードは「{p}」です",
    ],
    "seen2": [
        "FYI the backup user's password was reset to {p} by IT.",
        "new password → {p} (don't share)",
        "If the form asks, the passphrase is {p}",
        "ssh in as ubuntu, password {p}",
        "노트북 로그인 비밀번호: {p}",
        "관리 페이지 비번은 {p}예요",
        "数据库 root 用户的密码为 {p}",
        "新的 WiFi 密碼是 {p}",
        "検証環境のrootパスワードは {p} になっています",
        "パスワード → {p}",
    ],
    "seen3": [
        "Temp password for new hires this week: {p}",
        "pls use {p} as the pw for the shared drive",
        "Password updated, it's now {p}",
        "db creds → admin / {p}",
        "위키 계정 비밀번호 {p} 로 로그인하세요",
        "임시 비밀번호는 '{p}' 입니다",
        "服务器登录密码：{p}（请勿外传）",
        "把密码设置成 {p} 就行",
        "一時パスワード：{p}",
        "ログイン用のパスワードを {p} にしておきました",
    ],
    "seen4": [
        "Reminder: the kiosk admin password is still {p}, please change it.",
        "smtp relay login is mailer with password {p}",
        "passwd={p}",
        "They told me the door code password is {p} lol",
        "라우터 관리자 비밀번호가 {p} 라서 바꿔야 해요",
        "젠킨스 비번: {p}",
        "路由器后台密码是 {p}，记得改",
        "跳板机密码 {p}",
        "ルーターの管理パスワードが {p} のままです",
        "Jenkinsのパスワード：{p}",
    ],
    "seen5": [
        "Guest wifi is 'Office-5G', password {p}.",
        "My password for everything is basically {p} haha",
        "root / {p} on the old NAS",
        "The printer's admin pass: {p}",
        "회의실 PC 비밀번호 알려드릴게요. {p}",
        "DB 계정 pw는 {p} 입니다",
        "打印机管理员密码为：{p}",
        "WiFi 密码：{p}（访客）",
        "会議室PCのパスワードは {p} です",
        "旧NASのrootパスは {p}",
    ],
    "held": [
        "can someone reset my laptop? current password {p} stopped working",
        "staging admin login: ops / {p}",
        "Note to self - bank pw {p}",
        "the zip is encrypted, passphrase: {p}",
        "메일 서버 계정 암호 {p} 입니다",
        "새 비밀번호 {p} 로 바꿨습니다",
        "邮箱的登录密码是{p}",
        "临时密码 {p} 明天过期",
        "メールサーバのパスワード {p}",
        "新しいパスワード：{p}",
    ],
    "held2": [
        "if the SSO is down, fall back to local admin with {p}",
        "password hint for the shared Mac: it's {p}",
        "login = qa-bot ; password = {p}",
        "the safe combo / password is {p}, don't tell anyone",
        "공용 계정 로그인 정보: admin, {p}",
        "혹시 몰라서 적어둠 비번 {p}",
        "内网管理后台账号 admin 密码 {p}",
        "这个压缩包的密码：{p}",
        "共有PCのログインパスワードは「{p}」",
        "管理画面 admin / {p}",
    ],
    "held3": [
        "Jenkins admin login is ci-admin / {p}",
        "ask me for the pw if you forget, but it's {p} for now",
        "the credentials for the test tenant: tester@example.com and {p}",
        "the sudo prompt on build-03 wants {p}",
        "관리자 페이지 접속 정보 - 아이디 admin 비밀번호 {p}",
        "DB 로그인할 때 {p} 입력하면 돼요",
        "后台登录：用户名 root，密码 {p}",
        "登录测试机用 {p}",
        "検証サーバーにログインするときは {p} を使ってください",
        "管理者アカウント：admin　パス：{p}",
    ],
    "held4": [
        "VPN: user jsmith, pass {p}",
        "PSA the shared inbox password changed again -> {p}",
        "u: deploy  p: {p}",
        "Login for the staging console is {p} (same as last quarter)",
        "공유기 관리자 암호 바꿈: {p}",
        "테스트 계정 admin / {p} 로 들어가세요",
        "堡垒机账号 ops，密码：{p}",
        "这台服务器的 root 密码我改成 {p} 了",
        "ステージングの管理者パスワード変えました → {p}",
        "ログイン情報：ユーザー名 test / パスワード {p}",
    ],
}
TOKEN_TEMPLATES = {
    "tune": [
        "Use {t} for the CI job.",
        "token: {t}",
        "I put {t} in the deploy script for now.",
        "CI 토큰은 {t} 입니다.",
        "CI 用的令牌是 {t}",
        "CIのトークンは {t} です。",
    ],
    "seen": [
        "export SERVICE_TOKEN={t}",
        "here's the key we used in the demo {t} — revoke it later",
        "Authorization works with {t}, tested from my laptop",
        "배포할 때 이 키 쓰세요: {t}",
        "临时 key：{t}，明天作废",
        "検証用キーはこちら {t}",
    ],
    "seen2": [
        "token={t}",
        "paste {t} into the settings page",
        "the bot uses {t} as its credential",
        "이 토큰 {t} 은 만료 예정",
        "令牌 {t} 已经泄露了吗？",
        "トークン {t} を再発行してください",
    ],
    "seen3": [
        "curl -H 'X-Api-Key: {t}' https://api.internal",
        "stored {t} in the runbook by mistake",
        "{t} ← this one is the prod key",
        "운영 키 {t} 교체 필요",
        "生产环境的 key 是 {t}",
        "本番のキーは {t} です",
    ],
    "seen4": [
        "rotated the integration token, new one is {t}",
        "{t}",
        "config: api_token: {t}",
        "슬랙 봇 토큰 {t} 노출됨",
        "新的访问令牌：{t}",
        "アクセストークン {t} を使ってください",
    ],
    "seen5": [
        "leaked in the logs: {t}",
        "set the header x-token to {t}",
        "- token: {t}",
        "이건 테스트용 키예요 {t}",
        "请用这个 {t} 调用接口",
        "このキー {t} は明日失効します",
    ],
    "held": [
        "oops, committed {t} to the public repo",
        "GH_TOKEN: {t}",
        'works with curl -H "Authorization: token {t}"',
        "토큰 재발급: {t}",
        "机器人令牌 {t}",
        "APIトークン：{t}",
    ],
    "held2": [
        "Slack says this token is exposed: {t}",
        "env var SERVICE_KEY={t}",
        "used {t} for the nightly export",
        "키 유출됨 {t}",
        "密钥 {t} 请尽快轮换",
        "このトークン {t} は本番用",
    ],
    "held3": [
        "the webhook secret is {t}",
        "{t} expired yesterday",
        "add `{t}` to .env",
        "토큰 값: {t}",
        "把 {t} 配到环境变量里",
        "{t} を環境変数に設定",
    ],
    "held4": [
        "Bearer {t}",
        "please revoke {t} asap",
        "secrets.yaml has {t}",
        "배포 토큰 {t} 입니다",
        "访问密钥：{t}",
        "本番トークン：{t}",
    ],
}
URL_TEMPLATES = {
    "tune": [
        "Connect with {u}",
        "DATABASE_URL is {u}",
        "접속 주소: {u}",
        "连接串：{u}",
        "接続先は {u} です",
    ],
    "seen": [
        "the worker reads from {u} in prod",
        "clone it via {u} if SSH is blocked",
        "운영 큐 주소는 {u} 이에요",
        "生产环境用 {u} 连接",
        "本番は {u} を使っています",
    ],
    "seen2": [
        "backup job connects to {u}",
        "old DSN: {u}",
        "백업 작업은 {u} 에 연결합니다",
        "备份任务连接 {u}",
        "バックアップは {u} に接続する",
    ],
    "seen3": [
        "REDIS_URL={u}",
        "replica: {u}",
        "복제본 주소 {u}",
        "从库地址 {u}",
        "レプリカは {u}",
    ],
    "seen4": [
        "git remote set-url origin {u}",
        "psql {u}",
        "스테이징 연결 문자열 {u}",
        "测试库 {u} 可以直接连",
        "接続文字列：{u}",
    ],
    "seen5": [
        "CELERY_BROKER_URL = '{u}'",
        "tried {u} but it timed out",
        "DSN은 {u} 로 설정",
        "配置里写的是 {u}",
        "設定ファイルには {u} と書いてある",
    ],
    "held": [
        "SQLALCHEMY_DATABASE_URI={u}",
        "the dashboard reads from {u} every minute",
        "DB 접속: {u}",
        "数据库地址：{u}",
        "DBの接続先 {u}",
    ],
    "held2": [
        "connect string is {u}",
        "mongo shell: mongosh {u}",
        "연결 URL {u}",
        "连接 URL 是 {u}",
        "接続URL：{u}",
    ],
    "held3": [
        'psql "{u}"',
        "the ETL reads {u}",
        "접속 DSN {u}",
        "用 {u} 连上去",
        "{u} で接続",
    ],
    "held4": [
        'DATABASE_URL="{u}"',
        "broker at {u}",
        "DB URL: {u}",
        "库的地址是 {u}",
        "接続は {u} から",
    ],
}
UNPREFIXED_TEMPLATES = {
    "tune": [
        "{v} API key: {k}",
        "{v} key = {k}",
        "{v} API 키는 {k} 입니다",
        "{v} = {k}",
        "{v} 키 {k} 사용",
        "{v} key: here {k}",
    ],
    "seen": ["our {v} key is {k}", "{v} 的 API key 是 {k}", "{v} のAPIキーは {k} です"],
    "seen2": ["{v} api key → {k}", "{v} 키: {k}", "{v} 的密钥：{k}"],
    "seen3": ["{v}: {k}", "{v} API 키 {k}", "{v} のキー：{k}"],
    "seen4": ["the {v} secret key is {k}", "{v} 키는 여기 {k}", "{v} 接口密钥 = {k}"],
    "seen5": ["{v} credentials: {k}", "{v} API key → {k}", "{v} のシークレットは {k}"],
    "held": ["key for {v}: {k}", "{v} 인증 키 = {k}", "{v} 用的 key {k}"],
    "held2": ["{v} token {k}", "{v} 키: {k} (운영)", "{v} APIキー {k}"],
    "held3": ["{v} key for prod: {k}", "{v} API 키 → {k}", "{v} 的 key：{k}"],
    "held4": ["{v} API key is {k}", "{v} 토큰: {k}", "{v} のキーは {k} です"],
}


def url(rng: random.Random) -> str:
    user, secret = rng.choice(_NAMES), password(rng).replace("@", "%40").replace("#", "%23").replace("?", "%3F")
    host = rng.choice(["db.internal", "10.0.3.12", "cluster0.ab1cd.mongodb.net", "rabbit.prod.local", "gitlab.com"])
    shape = rng.randrange(8)
    shapes = [
        f"postgres://{user}:{secret}@{host}:5432/app",
        f"mysql://{user}:{secret}@{host}/orders",
        f"mongodb+srv://{user}:{secret}@{host}/?retryWrites=true",
        f"redis://:{secret}@{host}:6379/0",
        f"amqp://{user}:{secret}@{host}:5672/vhost",
        f"https://{user}:{secret}@{host}/group/repo.git",
        f"https://oauth2:glpat-{_r(rng, B64URL, 20)}@gitlab.com/team/app.git",
        f"jdbc:postgresql://{host}:5432/app?user={user}&password={secret}",
    ]
    return shapes[shape]


def _uuid(r: random.Random) -> str:
    return f"{_r(r, HEX, 8)}-{_r(r, HEX, 4)}-4{_r(r, HEX, 3)}-a{_r(r, HEX, 3)}-{_r(r, HEX, 12)}"


BENIGN = {
    "tune": [
        lambda r: (
            f"Release {r.randrange(1, 9)}.{r.randrange(0, 30)}.{r.randrange(0, 9)} ships commit {_r(r, HEX, 40)}."
        ),
        lambda r: f"The image digest is sha256:{_r(r, HEX, 64)}.",
        lambda r: "Passwords must be at least 12 characters and rotated every 90 days.",
        lambda r: "비밀번호는 8자 이상이어야 하며 특수문자를 포함해야 합니다.",
        lambda r: "密码至少需要 8 位，并且包含数字。",
        lambda r: "パスワードは12文字以上にしてください。",
        lambda r: "Set OPENAI_API_KEY in your shell; never commit it.",
        lambda r: "api_key = os.environ['ANTHROPIC_API_KEY']",
        lambda r: f"Request {r.randrange(10**5, 10**6)} failed with trace id {_r(r, HEX, 32)}.",
        lambda r: f"uuid {_r(r, HEX, 8)}-{_r(r, HEX, 4)}-4{_r(r, HEX, 3)}-a{_r(r, HEX, 3)}-{_r(r, HEX, 12)}",
        lambda r: "password: ${DB_PASSWORD}",
        lambda r: "ghp_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx is the placeholder in the docs.",
        lambda r: "Reset your password at https://id.example.com/reset?user=me",
        lambda r: "inline avatar /9j/4AAQSkZJRgABAQAAAQABAAD" + _r(r, ALNUM + "+/", 60),
    ],
    "seen": [
        lambda r: f"integrity sha512-{base64.b64encode(r.randbytes(64)).decode()}",
        lambda r: f"Docs live at https://docs.internal/{r.choice(_WORDS)}/{r.choice(_WORDS)}?page={r.randrange(9)}",
        lambda r: "The token is stored in Vault under secret/ci; ask #platform for access.",
        lambda r: "비밀번호 재설정 링크는 24시간 동안 유효합니다.",
        lambda r: "请在设置页面修改密码，旧密码会失效。",
        lambda r: "パスワードを忘れた場合は管理者に連絡してください。",
        lambda r: f"Pod {r.choice(_WORDS)}-worker-{_r(r, HEX[:10], 10)}-{_r(r, string.ascii_lowercase, 5)} restarted.",
        lambda r: "Use <YOUR_API_KEY> in the header; sk-... keys go in the secret store.",
        lambda r: f"Build {_r(r, HEX, 12)} passed in {r.randrange(3, 60)} minutes.",
        lambda r: f"ticket OPS-{r.randrange(100, 9999)}: rotate the API key quarterly",
    ],
    "seen2": [
        lambda r: "Rotate the API key every 90 days; the current one expires in March.",
        lambda r: f"Error 0x{_r(r, HEX, 8)} at address 0x{_r(r, HEX, 16)}",
        lambda r: f"Downloaded {_r(r, HEX, 40)}.tar.gz from the mirror",
        lambda r: f"The S3 object reports/2025/{_uuid(r)}.parquet was archived",
        lambda r: "패스워드 정책: 최소 10자, 대문자와 숫자 포함",
        lambda r: "密码错误三次后账号会被锁定",
        lambda r: "パスワードの有効期限は90日です",
        lambda r: f"See commit {_r(r, HEX, 7)} for the fix",
        lambda r: "token budget: 3,000 tokens per answer",
        lambda r: "The password field is hidden in the UI",
    ],
    "seen3": [
        lambda r: "The key insight is that caching helps.",
        lambda r: f"Checksum md5 {_r(r, HEX, 32)} matches the release notes.",
        lambda r: f"Trace {_r(r, HEX, 32)} shows the timeout.",
        lambda r: "API 키는 Vault에 저장되어 있습니다.",
        lambda r: "令牌有效期为一小时。",
        lambda r: "トークンの有効期限は1時間です。",
        lambda r: "Use the `--password-stdin` flag instead of -p.",
        lambda r: f"Build artifact app-{_r(r, HEX, 12)}.zip uploaded",
        lambda r: f"DNS TXT record google-site-verification={_r(r, B64URL, 43)}",
        lambda r: f"Rollout {r.randrange(2, 40)} of the token service finished at {r.randrange(10, 23)}:00.",
    ],
    "seen4": [
        lambda r: "Store the password in the secret manager, never in chat.",
        lambda r: f"Order {r.randrange(10**7, 10**8)} shipped; tracking {_r(r, UPPER_ALNUM, 18)}.",
        lambda r: f"The cache key is user:{r.randrange(1000, 99999)}:profile",
        lambda r: "비밀번호를 바꾸려면 설정 > 보안으로 가세요.",
        lambda r: "忘记密码时请点击“找回密码”。",
        lambda r: "トークンは毎日ローテーションされます。",
        lambda r: f"Merged PR #{r.randrange(100, 9999)} ({_r(r, HEX, 7)}) into main.",
        lambda r: f"Grafana dashboard uid {_r(r, ALNUM, 9)} shows the spike.",
        lambda r: f"Base64 of the logo is iVBORw0KGgoAAAANSUhEUgAA{_r(r, ALNUM + '+/', 40)}",
        lambda r: "The token endpoint returns 401 when the client id is wrong.",
    ],
    "seen5": [
        lambda r: "Passwords are hashed with argon2id; never log them.",
        lambda r: f"Job {_r(r, HEX, 24)} finished with exit code {r.randrange(0, 3)}.",
        lambda r: f"The feature flag key is new_checkout_flow_v{r.randrange(2, 9)}",
        lambda r: "비밀번호는 반드시 암호화해서 저장합니다.",
        lambda r: "令牌过期后需要重新登录。",
        lambda r: "パスワードは定期的に変更してください。",
        lambda r: f"Invoice INV-{r.randrange(10**5, 10**6)} total 12,300 KRW",
        lambda r: f'ETag W/"{_r(r, HEX, 32)}" returned by the CDN',
        lambda r: f"wheel sha256={base64.urlsafe_b64encode(r.randbytes(32)).decode().rstrip('=')}",
        lambda r: "The API key rotation runbook lives in Confluence.",
    ],
    "held": [
        lambda r: "Password resets go through the self-service portal.",
        lambda r: f"Container {_r(r, HEX, 12)} exited with status 137.",
        lambda r: f"Request id {_uuid(r)} timed out after 30 s.",
        lambda r: "비밀번호 변경 주기는 90일입니다.",
        lambda r: "密码长度不少于 12 个字符。",
        lambda r: "パスワードの再設定はポータルから行います。",
        lambda r: f"The S3 ETag for the backup is {_r(r, HEX, 32)}.",
        lambda r: f"Sentry issue {r.randrange(10**9, 10**10)} regressed in release {r.randrange(100, 999)}.",
        lambda r: f"checksum sha512:{_r(r, HEX, 128)}",
        lambda r: "The token counter resets every midnight UTC.",
    ],
    "held2": [
        lambda r: "We never share passwords over Slack.",
        lambda r: f"Migration {r.randrange(1, 400):04d}_add_index applied.",
        lambda r: f"Trace context traceparent 00-{_r(r, HEX, 32)}-{_r(r, HEX, 16)}-01",
        lambda r: "비밀번호 분실 시 관리자에게 문의하세요.",
        lambda r: "请勿在群聊中发送密码。",
        lambda r: "パスワードは英数字記号を含めてください。",
        lambda r: f"Deployed build {r.randrange(1000, 9999)} ({_r(r, HEX, 40)}).",
        lambda r: f"Idempotency key capture-{_r(r, HEX, 16)} was replayed.",
        lambda r: f"sha1 {_r(r, HEX, 40)} verified",
        lambda r: "The access token lifetime is 15 minutes.",
    ],
    "held3": [
        lambda r: "Log in with your SSO account; local passwords are disabled.",
        lambda r: f"Account {r.randrange(10**5, 10**6)} was locked after 5 failed logins.",
        lambda r: f"admin panel build {_r(r, HEX, 8)} deployed",
        lambda r: "관리자 계정은 SSO로만 로그인할 수 있습니다.",
        lambda r: "登录失败次数过多，账号已锁定 30 分钟。",
        lambda r: "ログインできない場合はヘルプデスクへ。",
        lambda r: f"User u{r.randrange(10**6, 10**7)} signed in from 10.0.{r.randrange(255)}.{r.randrange(255)}",
        lambda r: f"Root cause: login service OOM at 0x{_r(r, HEX, 8)}",
        lambda r: f"Password strength meter v{r.randrange(1, 5)}.{r.randrange(10)} shipped",
        lambda r: f"sudo apt install libpq-dev=15.{r.randrange(1, 9)}-1",
    ],
    "held4": [
        lambda r: "Never paste passwords into tickets; use the vault link.",
        lambda r: f"Session {_uuid(r)} logged out after 15 min idle.",
        lambda r: f"user:{r.randrange(1000, 99999)}:session cache hit rate 97%",
        lambda r: "비밀번호를 잊으셨나요? 재설정 메일을 보내드립니다.",
        lambda r: "账号密码登录已下线，请使用扫码登录。",
        lambda r: "パスワード認証は無効化されています。",
        lambda r: f"login latency p95 {r.randrange(50, 900)} ms (build {_r(r, HEX, 7)})",
        lambda r: f"The admin user can export CSV files up to {r.randrange(10, 99)} MB.",
        lambda r: f"Token usage: {r.randrange(1000, 99999)} in / {r.randrange(100, 9999)} out",
        lambda r: f"ssh deploy@10.0.{r.randrange(255)}.{r.randrange(255)} -p 2222",
    ],
}
PUBLIC = {
    "tune": [
        lambda r: (
            '{"kty":"RSA","e":"AQAB","use":"sig","kid":"'
            + _r(r, ALNUM, 16)
            + '","alg":"RS256","n":"'
            + jwks_modulus(r)
            + '"}'
        ),
        lambda r: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI" + _r(r, ALNUM + "+/", 43) + " ops@bastion",
        lambda r: "certificate fingerprint: " + _r(r, B64URL, 43),
        lambda r: f"TXT facebook-domain-verification={_r(r, string.ascii_lowercase + string.digits, 30)}",
        lambda r: "host key fingerprint " + _r(r, ALNUM + "+/", 43),
    ],
    "seen": [
        lambda r: 'keys[0].n = "' + jwks_modulus(r) + '" (the RS256 public key)',
        lambda r: '"n": "' + jwks_modulus(r) + '",\n"e": "AQAB"',
        lambda r: (
            "-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA"
            + _r(r, ALNUM + "+/", 64)
            + "\n-----END PUBLIC KEY-----"
        ),
    ],
    "seen2": [
        lambda r: '{"kty":"EC","crv":"P-256","x":"' + _r(r, B64URL, 43) + '","y":"' + _r(r, B64URL, 43) + '"}',
        lambda r: "modulus n: " + jwks_modulus(r),
        lambda r: '{"keys":[{"kty":"RSA","n":"' + jwks_modulus(r) + '","e":"AQAB","kid":"' + _r(r, ALNUM, 20) + '"}]}',
    ],
    "seen3": [
        lambda r: 'JWK: {"kty":"OKP","crv":"Ed25519","x":"' + _r(r, B64URL, 43) + '"}',
        lambda r: "n = " + jwks_modulus(r),
        lambda r: "the x5t thumbprint is " + _r(r, B64URL, 27),
    ],
    "seen4": [
        lambda r: '"jwks": {"keys": [{"kty": "RSA", "e": "AQAB", "n": "' + jwks_modulus(r) + '"}]}',
        lambda r: "ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAI" + _r(r, ALNUM + "+/", 80) + "= ci@runner",
        lambda r: "SHA256 fingerprint " + _r(r, ALNUM + "+/", 43),
    ],
    "seen5": [
        lambda r: "public_key: ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQ" + _r(r, ALNUM + "+/", 120) + " deploy",
        lambda r: '{"kty":"RSA","alg":"PS256","n":"' + jwks_modulus(r) + '","e":"AQAB"}',
        lambda r: (
            "-----BEGIN CERTIFICATE-----\nMIIDdzCCAl+gAwIBAgIE"
            + _r(r, ALNUM + "+/", 64)
            + "\n-----END CERTIFICATE-----"
        ),
    ],
    "held": [
        lambda r: '{"use":"enc","kty":"RSA","kid":"' + _r(r, ALNUM, 10) + '","n":"' + jwks_modulus(r) + '","e":"AQAB"}',
        lambda r: "age public recipient: age1" + _r(r, "qpzry9x8gf2tvdw0s3jn54khce6mua7l", 58),
        lambda r: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI" + _r(r, ALNUM + "+/", 43) + " laptop",
    ],
    "held2": [
        lambda r: '{"kty":"EC","crv":"P-384","x":"' + _r(r, B64URL, 64) + '","y":"' + _r(r, B64URL, 64) + '"}',
        lambda r: "modulus (n) = " + jwks_modulus(r),
        lambda r: "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAACAQ" + _r(r, ALNUM + "+/", 200) + " build@ci",
    ],
    "held3": [
        lambda r: '"x5c": ["MIIC' + base64.b64encode(r.randbytes(600)).decode() + '"]',
        lambda r: "public key (base64url): " + jwks_modulus(r),
        lambda r: "公開鍵のモジュラス n: " + jwks_modulus(r),
    ],
    "held4": [
        lambda r: (
            "-----BEGIN RSA PUBLIC KEY-----\nMIIBCgKCAQEA"
            + base64.b64encode(r.randbytes(200)).decode()
            + "\n-----END RSA PUBLIC KEY-----"
        ),
        lambda r: "공개키(n) " + jwks_modulus(r),
        lambda r: (
            "known_hosts: github.com ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAI"
            + _r(r, ALNUM + "+/", 80)
            + "="
        ),
    ],
}

_SEEDS = {
    "tune": 20261206,
    "seen": 91730412,
    "seen2": 55012893,
    "seen3": 70318846,
    "seen4": 38812377,
    "seen5": 64420931,
    "held": 17290553,
    "held2": 80146022,
    "held3": 27719404,
    "held4": 60381157,
}
PER_TEMPLATE = dict.fromkeys(_SEEDS, 12)


def corpus(part: str) -> list[Sample]:
    """Every sample of one part: "tune" (widened against); "seen" to "seen5" (held-apart parts, each
    measured once and then no longer apart: the detectors were widened by the kinds of phrasing they
    showed, through new "tune" sentences); "held" and "held2" (written after that, each measured once);
    "held3" and "held4" (written and committed before the detectors were widened for the phrasings held2
    showed, measured once after)."""
    rng = random.Random(_SEEDS[part])
    samples: list[Sample] = []
    n = PER_TEMPLATE[part]
    for template in PASSWORD_TEMPLATES[part]:
        samples += [Sample("password_prose", template.format(p=password(rng)), True) for _ in range(n)]
    for make in SAAS:
        for template in TOKEN_TEMPLATES[part][:: 2 if part == "tune" else 1][:3]:
            samples.append(Sample("saas_token", template.format(t=make(rng)), True))
    for make in LLM:
        for template in TOKEN_TEMPLATES[part][:4]:
            samples.append(Sample("llm_api_key", template.format(t=make(rng)), True))
    for vendor, make in LLM_UNPREFIXED:
        for template in UNPREFIXED_TEMPLATES[part]:
            samples += [Sample("llm_api_key", template.format(v=vendor, k=make(rng)), True) for _ in range(2)]
    for template in URL_TEMPLATES[part]:
        samples += [Sample("url_credentials", template.format(u=url(rng)), True) for _ in range(n)]
    for make_text in PUBLIC[part]:
        samples += [Sample("public_key", make_text(rng), False) for _ in range(n * 2)]
    for make_text in BENIGN[part]:
        samples += [Sample("benign", make_text(rng), False) for _ in range(n * 2)]
    return samples
