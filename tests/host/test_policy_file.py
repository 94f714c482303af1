"""The admission policy as the host's TOML file: parsed strictly, re-read on change, never guessed."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

import pytest

from engram_memory.contract.errors import ContractError, ErrorCode
from engram_memory.engine.admission.policy import AdmissionPolicy, PolicyError, policy_from_mapping
from engram_memory.engine.secrets import CATEGORIES, DEFAULT_CATEGORIES
from engram_memory.host.policy_file import DEFAULT_POLICY_TOML, FilePolicySource, read_policy


@pytest.fixture
def policy_path(tmp_path: Path) -> Path:
    path = tmp_path / "policy.toml"
    path.write_text(DEFAULT_POLICY_TOML, encoding="utf-8")
    return path


def _write(path: Path, text: str) -> None:
    """Rewrite the file and move its modification time on, so a change is visible whatever the clock's grain."""
    before = path.stat().st_mtime_ns if path.exists() else 0
    path.write_text(text, encoding="utf-8")
    stamp = max(path.stat().st_mtime_ns, before + 1_000_000_000)
    os.utime(path, ns=(stamp, stamp))


def _parse(text: str) -> AdmissionPolicy:
    return policy_from_mapping(tomllib.loads(text))


# -- the default policy --------------------------------------------------------------------------


def test_default_policy_text_parses_to_the_default_policy(policy_path: Path) -> None:
    parsed = read_policy(policy_path)
    expected = AdmissionPolicy().with_digest()
    assert parsed == expected
    assert parsed.digest == expected.digest
    assert parsed.digest.startswith("sha256:")


def test_default_policy_accepts_automatically_with_one_citation_and_every_default_detector() -> None:
    policy = _parse(DEFAULT_POLICY_TOML)
    assert (policy.policy_id, policy.version, policy.mode) == ("default", 1, "auto")
    assert policy.min_citations == 1
    assert policy.require_attestation is False
    assert policy.max_payload_bytes == 1_048_576
    assert policy.retain_principals == frozenset()
    assert policy.max_retention_days == 365
    assert policy.consented_families == frozenset()
    assert policy.redact_fields == ()
    assert policy.secret_categories == DEFAULT_CATEGORIES
    assert "personal_data" not in policy.secret_categories


def test_empty_policy_file_means_the_default_policy(policy_path: Path) -> None:
    policy_path.write_text("", encoding="utf-8")
    assert read_policy(policy_path) == AdmissionPolicy().with_digest()


# -- valid variations ----------------------------------------------------------------------------


def test_review_mode_is_parsed() -> None:
    assert _parse('mode = "review"\n').mode == "review"


def test_secret_categories_are_switched_on_and_off() -> None:
    policy = _parse("[secrets]\npersonal_data = true\nhigh_entropy = false\n")
    assert policy.secret_categories == (DEFAULT_CATEGORIES | {"personal_data"}) - {"high_entropy"}


@pytest.mark.parametrize("category", CATEGORIES)
def test_every_known_secret_category_can_be_switched_off(category: str) -> None:
    assert category not in _parse(f"[secrets]\n{category} = false\n").secret_categories


def test_full_policy_is_parsed_value_by_value() -> None:
    policy = _parse(
        'policy_id = "team"\nversion = 7\nmode = "review"\nmin_citations = 2\nrequire_attestation = true\n'
        'max_payload_bytes = 4096\nretain_principals = ["alice", "*"]\nmax_retention_days = 30\n'
        'consented_families = ["family:a"]\nredact_fields = ["provenance.session", "citations.locator"]\n'
    )
    assert (policy.policy_id, policy.version, policy.mode) == ("team", 7, "review")
    assert (policy.min_citations, policy.require_attestation, policy.max_payload_bytes) == (2, True, 4096)
    assert policy.retain_principals == frozenset({"alice", "*"})
    assert policy.may_retain("anyone")
    assert policy.max_retention_days == 30
    assert policy.consented_families == frozenset({"family:a"})
    assert policy.redact_fields == ("citations.locator", "provenance.session")


def test_the_default_time_bounds_leave_the_digest_of_older_policies_alone() -> None:
    assert "times" not in _parse("").as_mapping()
    narrowed = _parse('[times]\nearliest = "1900-01-01T00:00:00.000Z"\n')
    assert narrowed.times.earliest_ms == -2_208_988_800_000 and narrowed.digest != _parse("").digest


def test_policies_that_differ_have_different_digests() -> None:
    assert _parse("version = 1\n").digest != _parse("version = 2\n").digest
    assert _parse("min_citations = 1\n").digest == _parse("").digest


# -- refusals ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("colour = 'blue'\n", "unknown policy key: colour"),
        ("[review]\nqueue = 1\n", "unknown policy key: review"),
        ('mode = "manual"\n', "mode must be 'auto' or 'review'"),
        ('mode = "AUTO"\n', "mode must be 'auto' or 'review'"),
        ("mode = 1\n", "mode must be a str"),
        ('version = "1"\n', "version must be an integer"),
        ("version = true\n", "version must be an integer"),
        ("version = 1.5\n", "version must be an integer"),
        ("min_citations = 1.0\n", "min_citations must be an integer"),
        ('require_attestation = "yes"\n', "require_attestation must be a bool"),
        ("require_attestation = 1\n", "require_attestation must be a bool"),
        ("policy_id = 5\n", "policy_id must be a str"),
        ('retain_principals = "alice"\n', "retain_principals must be a list of strings"),
        ("consented_families = [1]\n", "consented_families must be a list of strings"),
        ("redact_fields = [true]\n", "redact_fields must be a list of strings"),
        ("secrets = 3\n", "[secrets] must be a table"),
        (
            "[secrets]\npassport_number = true\n",
            "secrets.passport_number must be a known category set to true or false",
        ),
        ('[secrets]\njwt = "on"\n', "secrets.jwt must be a known category set to true or false"),
        ('redact_fields = ["payload.components"]\n', "redact_fields names a field that cannot be redacted"),
        (
            'redact_fields = ["provenance.session", "citations"]\n',
            "redact_fields names a field that cannot be redacted",
        ),
        ("min_citations = 0\n", "min_citations, max_payload_bytes and max_retention_days must be positive"),
        ("max_payload_bytes = -1\n", "min_citations, max_payload_bytes and max_retention_days must be positive"),
        ("max_retention_days = 0\n", "min_citations, max_payload_bytes and max_retention_days must be positive"),
        ("version = 9007199254740992\n", "version must be at most 2^53 - 1"),
        ("max_payload_bytes = 9223372036854775807\n", "max_payload_bytes must be at most 2^53 - 1"),
        ("min_citations = -9007199254740993\n", "min_citations must be at most 2^53 - 1"),
        ("max_retention_days = 9007199254740991\n", "max_retention_days must be at most 36500000"),
        ('policy_id = "cafe\u0301"\n', "the policy holds text canonical JSON cannot carry (not NFC)"),
        ('retain_principals = ["cafe\u0301"]\n', "the policy holds text canonical JSON cannot carry (not NFC)"),
        ("times = 1\n", "[times] must be a table"),
        ("[times]\nfrom = 1\n", "unknown policy key: times.from"),
        ('[times]\nearliest = "1950"\n', "times.earliest must be an instant written YYYY-MM-DDTHH:mm:ss.sssZ"),
        ("[times]\nlatest = 5\n", "times.latest must be an instant written YYYY-MM-DDTHH:mm:ss.sssZ"),
        ('[times]\nlatest = "0001-01-01T00:00:00.000Z"\n', "times.earliest must be before times.latest"),
        ('[times]\nallow_seconds_range = "yes"\n', "allow_seconds_range must be a bool"),
    ],
)
def test_invalid_policy_text_raises_policy_error_with_a_reason(text: str, message: str) -> None:
    with pytest.raises(PolicyError) as raised:
        _parse(text)
    assert str(raised.value) == message


def test_read_policy_raises_policy_error_when_file_is_not_toml(policy_path: Path) -> None:
    policy_path.write_text("mode = \n", encoding="utf-8")
    with pytest.raises(PolicyError) as raised:
        read_policy(policy_path)
    assert str(raised.value).startswith("policy.toml is not valid TOML: ")
    assert "\n" not in str(raised.value)


def test_read_policy_raises_policy_error_when_file_is_not_utf8(policy_path: Path) -> None:
    policy_path.write_bytes(b'policy_id = "caf\xe9"\n')
    with pytest.raises(PolicyError):
        read_policy(policy_path)


def test_read_policy_raises_os_error_when_file_is_missing(tmp_path: Path) -> None:
    with pytest.raises(OSError):
        read_policy(tmp_path / "absent.toml")


# -- FilePolicySource ----------------------------------------------------------------------------


def test_file_policy_source_reads_the_default_file(policy_path: Path) -> None:
    assert FilePolicySource(policy_path).current() == AdmissionPolicy().with_digest()


def test_file_policy_source_rereads_after_the_file_changes(policy_path: Path) -> None:
    source = FilePolicySource(policy_path)
    assert source.current().mode == "auto"
    _write(policy_path, DEFAULT_POLICY_TOML.replace('mode = "auto"', 'mode = "review"'))
    assert source.current().mode == "review"
    _write(policy_path, DEFAULT_POLICY_TOML.replace("version = 1", "version = 2"))
    changed = source.current()
    assert (changed.mode, changed.version) == ("auto", 2)


def test_file_policy_source_rereads_when_only_the_modification_time_moves(policy_path: Path) -> None:
    source = FilePolicySource(policy_path)
    assert source.current().version == 1
    _write(policy_path, DEFAULT_POLICY_TOML.replace("version = 1", "version = 9"))
    assert source.current().version == 9


def test_file_policy_source_answers_policy_unavailable_for_a_broken_file(policy_path: Path) -> None:
    source = FilePolicySource(policy_path)
    source.current()
    _write(policy_path, 'mode = "sometimes"\n')
    with pytest.raises(ContractError) as raised:
        source.current()
    assert raised.value.code is ErrorCode.POLICY_UNAVAILABLE
    assert raised.value.retriable


def test_file_policy_source_keeps_answering_policy_unavailable_until_fixed(policy_path: Path) -> None:
    source = FilePolicySource(policy_path)
    _write(policy_path, "this is not toml")
    for _ in range(3):
        with pytest.raises(ContractError) as raised:
            source.current()
        assert raised.value.code is ErrorCode.POLICY_UNAVAILABLE


def test_file_policy_source_recovers_when_the_file_is_fixed(policy_path: Path) -> None:
    source = FilePolicySource(policy_path)
    _write(policy_path, "this is not toml")
    with pytest.raises(ContractError):
        source.current()
    _write(policy_path, DEFAULT_POLICY_TOML.replace("version = 1", "version = 3"))
    assert source.current().version == 3


def test_file_policy_source_never_falls_back_to_the_last_good_policy(policy_path: Path) -> None:
    source = FilePolicySource(policy_path)
    _write(policy_path, 'mode = "review"\n')
    assert source.current().mode == "review"
    _write(policy_path, 'mode = "review"\nunknown_knob = 1\n')
    with pytest.raises(ContractError) as raised:
        source.current()
    assert raised.value.code is ErrorCode.POLICY_UNAVAILABLE


def test_file_policy_source_answers_policy_unavailable_when_the_file_is_deleted(policy_path: Path) -> None:
    source = FilePolicySource(policy_path)
    source.current()
    policy_path.unlink()
    with pytest.raises(ContractError) as raised:
        source.current()
    assert raised.value.code is ErrorCode.POLICY_UNAVAILABLE
    policy_path.write_text(DEFAULT_POLICY_TOML, encoding="utf-8")
    assert source.current() == AdmissionPolicy().with_digest()


def test_file_policy_source_answers_policy_unavailable_when_the_file_is_a_folder(tmp_path: Path) -> None:
    folder = tmp_path / "policy.toml"
    folder.mkdir()
    with pytest.raises(ContractError) as raised:
        FilePolicySource(folder).current()
    assert raised.value.code is ErrorCode.POLICY_UNAVAILABLE


def test_file_policy_source_answers_policy_unavailable_when_the_file_is_not_utf8(policy_path: Path) -> None:
    source = FilePolicySource(policy_path)
    source.current()
    policy_path.write_bytes(b'policy_id = "caf\xe9"\n')
    with pytest.raises(ContractError) as raised:
        source.current()
    assert raised.value.code is ErrorCode.POLICY_UNAVAILABLE
