"""`access.toml`: the host's access rules as a file, read strictly.

A rule that cannot be read is never guessed at: the whole file is refused with a one-line reason naming
the rule and the key, and nobody signs in until the host fixes it (a typo must not admit, or widen, anyone).
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from engram_memory.contract.binding import TRUST_CLASSES
from engram_memory.contract.tools import Tool, tool_from_name
from engram_memory.host.access.rules import Access, AccessRules, Conditions, IdentityProvider, Rule
from engram_memory.host.bindings import BindingError, parse_duration
from engram_memory.host.language.catalogue import _
from engram_memory.host.outbound import https_or_loopback

FILE_NAME = "access.toml"

# Short-lived access tokens; a refresh token's family lives longer and is rotated on every use.
DEFAULT_ACCESS_LIFETIME_S = 10 * 60
ACCESS_LIFETIME_BOUNDS_S = (60, 24 * 3600)
DEFAULT_REFRESH_LIFETIME_S = 30 * 86_400
REFRESH_LIFETIME_BOUNDS_S = (3600, 366 * 86_400)
DEFAULT_GRANTS = frozenset({Tool.SEARCH.value, Tool.GET.value, Tool.CAPTURE.value, Tool.REQUEST_ADMISSION.value})
DEFAULT_PURPOSE = "team-memory"

_CONDITION_KEYS = ("issuer", "subject", "email", "email_domain", "group")
_ACCESS_KEYS = (
    "tenant",
    "workspace",
    "workspaces",
    "grants",
    "purpose",
    "confirm_mutations",
    "trust_class",
    "access_lifetime",
    "refresh_lifetime",
)
_DEFAULT_KEYS = ("grants", "purpose", "confirm_mutations", "trust_class", "access_lifetime", "refresh_lifetime")
_RULE_KEYS = ("name", "everyone", "refuse", *_CONDITION_KEYS, *_ACCESS_KEYS)

EXAMPLE_ACCESS_TOML = """\
# engram-memory access rules: who may sign in, and what their agents' tokens carry.
# The first rule whose conditions all hold decides; a person no rule matches is refused.
# Conditions (each a string or a list; any listed value will do): issuer, subject, email,
# email_domain (verified emails only), group. A rule with no condition must say everyone = true.

[defaults]
grants = ["search", "get", "capture", "request_admission"]
purpose = "team-memory"
confirm_mutations = false
access_lifetime = "10m"
refresh_lifetime = "30d"

[[rules]]
name = "contractors"
group = "contractors"
refuse = true

[[rules]]
name = "engineering"
email_domain = "example.com"
tenant = "acme"
workspaces = ["engineering", "shared"]
"""


class AccessRulesError(Exception):
    """access.toml cannot be used; the message is one line naming the rule and the key."""


def read_access_rules(path: Path) -> AccessRules | None:
    """The rules in `path`, or None when the file does not exist (nobody signs in)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise AccessRulesError(
            _("{name}: cannot be read ({name2})").format(name=path.name, name2=type(exc).__name__)
        ) from exc
    return parse_access_rules(text)


def parse_access_rules(text: str) -> AccessRules:
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise AccessRulesError(_("{file_name}: not valid TOML ({exc})").format(file_name=FILE_NAME, exc=exc)) from exc
    unknown = sorted(set(document) - {"defaults", "rules", "identity_provider"})
    if unknown:
        known = "defaults, rules, identity_provider"
        raise AccessRulesError(
            _("{file_name}: unknown table or key '{key}' (known: {known})").format(
                file_name=FILE_NAME, key=unknown[0], known=known
            )
        )
    defaults = document.get("defaults", {})
    if not isinstance(defaults, dict):
        raise AccessRulesError(_("{file_name}: [defaults] must be a table").format(file_name=FILE_NAME))
    _reject_unknown(defaults, _DEFAULT_KEYS, f"{FILE_NAME} [defaults]")
    rules = document.get("rules", [])
    if not isinstance(rules, list) or not all(isinstance(rule, dict) for rule in rules):
        raise AccessRulesError(
            _("{file_name}: rules must be an array of tables ([[rules]])").format(file_name=FILE_NAME)
        )
    parsed = tuple(_rule(index, rule, defaults) for index, rule in enumerate(rules, start=1))
    names = [rule.name for rule in parsed]
    repeated = next((name for name in names if names.count(name) > 1), None)
    if repeated is not None:
        raise AccessRulesError(
            _("{file_name}: two rules are named '{repeated}'").format(file_name=FILE_NAME, repeated=repeated)
        )
    provider = document.get("identity_provider")
    return AccessRules(rules=parsed, identity_provider=None if provider is None else _provider(provider))


_PROVIDER_KEYS = ("name", "issuer", "client_id", "client_secret_file", "scopes", "groups_claim")


def _provider(table: Any) -> IdentityProvider:
    where = f"{FILE_NAME} [identity_provider]"
    if not isinstance(table, dict):
        raise AccessRulesError(_("{where} must be a table").format(where=where))
    _reject_unknown(table, _PROVIDER_KEYS, where)
    values: dict[str, str] = {}
    for key in ("name", "issuer", "client_id", "client_secret_file"):
        value = table.get(key)
        if not isinstance(value, str) or not value.strip():
            raise AccessRulesError(_("{where}: {key} must be a non-empty string").format(where=where, key=key))
        values[key] = value.strip()
    if not https_or_loopback(values["issuer"]):
        raise AccessRulesError(_("{where}: issuer must be an https:// URL").format(where=where))
    scopes = table.get("scopes", ["openid", "email", "profile"])
    if not isinstance(scopes, list) or "openid" not in scopes or not all(isinstance(s, str) and s for s in scopes):
        raise AccessRulesError(_("{where}: scopes must be a list of names including openid").format(where=where))
    groups_claim = table.get("groups_claim", "groups")
    if not isinstance(groups_claim, str) or not groups_claim:
        raise AccessRulesError(_("{where}: groups_claim must be a claim's name").format(where=where))
    return IdentityProvider(
        name=values["name"],
        issuer=values["issuer"].rstrip("/"),
        client_id=values["client_id"],
        client_secret_file=values["client_secret_file"],
        scopes=tuple(dict.fromkeys(scopes)),
        groups_claim=groups_claim,
    )


def _reject_unknown(table: Mapping[str, Any], known: tuple[str, ...], where: str) -> None:
    unknown = sorted(set(table) - set(known))
    if unknown:
        raise AccessRulesError(
            _("{where}: unknown key '{key}' (known: {known})").format(
                where=where, key=unknown[0], known=", ".join(known)
            )
        )


def _rule(index: int, table: Mapping[str, Any], defaults: Mapping[str, Any]) -> Rule:
    name = table.get("name", f"rule {index}")
    where = f"{FILE_NAME} rule {index}"
    if not isinstance(name, str) or not name.strip():
        raise AccessRulesError(_("{where}: name must be a non-empty string").format(where=where))
    where = f"{FILE_NAME} rule {index} ('{name}')"
    _reject_unknown(table, _RULE_KEYS, where)
    conditions = _conditions(table, where)
    everyone = _boolean(table, "everyone", False, where)
    if conditions == Conditions() and not everyone:
        raise AccessRulesError(
            _("{where}: no condition; give one ({keys}) or everyone = true").format(
                where=where, keys=", ".join(_CONDITION_KEYS)
            )
        )
    if everyone and conditions != Conditions():
        raise AccessRulesError(_("{where}: everyone = true cannot stand beside a condition").format(where=where))
    if _boolean(table, "refuse", False, where):
        granted = sorted(set(table) & set(_ACCESS_KEYS))
        if granted:
            raise AccessRulesError(
                _("{where}: a refusing rule grants nothing, but it names '{tool}'").format(where=where, tool=granted[0])
            )
        return Rule(name=name, conditions=conditions, access=None)
    return Rule(name=name, conditions=conditions, access=_access(table, defaults, where))


def _conditions(table: Mapping[str, Any], where: str) -> Conditions:
    values = {key: _strings(table, key, where) for key in _CONDITION_KEYS}
    lowered = {key: _lower(values[key]) for key in ("email", "email_domain")}
    return Conditions(
        issuers=values["issuer"],
        subjects=values["subject"],
        emails=lowered["email"],
        email_domains=lowered["email_domain"],
        groups=values["group"],
    )


def _lower(values: frozenset[str] | None) -> frozenset[str] | None:
    return None if values is None else frozenset(value.lower() for value in values)


def _strings(table: Mapping[str, Any], key: str, where: str) -> frozenset[str] | None:
    value = table.get(key)
    if value is None:
        return None
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items or not all(isinstance(item, str) and item for item in items):
        raise AccessRulesError(
            _("{where}: {key} must be a non-empty string or a non-empty list of them").format(where=where, key=key)
        )
    return frozenset(items)


def _boolean(table: Mapping[str, Any], key: str, default: bool, where: str) -> bool:
    value = table.get(key, default)
    if not isinstance(value, bool):
        raise AccessRulesError(_("{where}: {key} must be true or false").format(where=where, key=key))
    return value


def _access(table: Mapping[str, Any], defaults: Mapping[str, Any], where: str) -> Access:
    def setting(key: str) -> Any:
        return table[key] if key in table else defaults.get(key)

    tenant = table.get("tenant")
    if not isinstance(tenant, str) or not tenant:
        raise AccessRulesError(_("{where}: tenant must be a non-empty string").format(where=where))
    if "workspace" in table and "workspaces" in table:
        raise AccessRulesError(_("{where}: give workspace or workspaces, not both").format(where=where))
    workspaces = _strings(table, "workspaces" if "workspaces" in table else "workspace", where)
    if workspaces is None:
        raise AccessRulesError(_("{where}: workspace (or workspaces) is required").format(where=where))
    raw = table.get("workspaces", table.get("workspace"))
    ordered = [raw] if isinstance(raw, str) else raw
    purpose = setting("purpose") if setting("purpose") is not None else DEFAULT_PURPOSE
    if not isinstance(purpose, str) or not purpose:
        raise AccessRulesError(_("{where}: purpose must be a non-empty string").format(where=where))
    trust_class = setting("trust_class") if setting("trust_class") is not None else "asserted"
    if trust_class not in TRUST_CLASSES:
        raise AccessRulesError(
            _("{where}: trust_class must be one of {choices}").format(where=where, choices=", ".join(TRUST_CLASSES))
        )
    confirm = setting("confirm_mutations")
    if confirm is not None and not isinstance(confirm, bool):
        raise AccessRulesError(_("{where}: confirm_mutations must be true or false").format(where=where))
    return Access(
        tenant=tenant,
        workspaces=tuple(dict.fromkeys(ordered)),
        grants=_grants(setting("grants"), where),
        purpose=purpose,
        confirm_mutations=bool(confirm),
        trust_class=trust_class,
        access_lifetime_s=_lifetime(setting("access_lifetime"), "access_lifetime", where),
        refresh_lifetime_s=_lifetime(setting("refresh_lifetime"), "refresh_lifetime", where),
    )


def _grants(value: Any, where: str) -> frozenset[str]:
    if value is None:
        return DEFAULT_GRANTS
    if value == "all":
        return frozenset(tool.value for tool in Tool)
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise AccessRulesError(_('{where}: grants must be "all" or a list of tool names').format(where=where))
    tools = [tool_from_name(item) for item in value]
    if None in tools:
        unknown = value[tools.index(None)]
        raise AccessRulesError(
            _("{where}: grants names an unknown tool '{unknown}'").format(where=where, unknown=unknown)
        )
    return frozenset(tool.value for tool in tools if tool is not None)


def _lifetime(value: Any, key: str, where: str) -> int:
    default, (least, most) = (
        (DEFAULT_ACCESS_LIFETIME_S, ACCESS_LIFETIME_BOUNDS_S)
        if key == "access_lifetime"
        else (DEFAULT_REFRESH_LIFETIME_S, REFRESH_LIFETIME_BOUNDS_S)
    )
    if value is None:
        return default
    if not isinstance(value, str):
        raise AccessRulesError(
            _('{where}: {key} is a duration such as "10m", "8h" or "30d"').format(where=where, key=key)
        )
    try:
        seconds = parse_duration(value)
    except BindingError as exc:
        raise AccessRulesError(f"{where}: {key}: {exc}") from exc
    if not least <= seconds <= most:
        raise AccessRulesError(
            _("{where}: {key} must lie between {least} s and {most} s").format(
                where=where, key=key, least=least, most=most
            )
        )
    return seconds
