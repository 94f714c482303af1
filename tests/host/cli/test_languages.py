"""The command line in the person's language: LANG, LC_ALL, LC_MESSAGES and LANGUAGE as gettext reads them,
or `--lang` anywhere on the line; help, listings, failures and Click's own usage errors all follow it."""

from __future__ import annotations

import re
from pathlib import Path

import opencc
import pytest

from engram_memory.host.settings import HostPaths
from tests.host.clirun import assert_one_line_failure, cli, cli_process
from tests.support.agents import StdioAgent, refusal_message
from tests.support.homes import make_home, remember

HANGUL = re.compile(r"[\uac00-\ud7a3]")
HAN = re.compile(r"[\u4e00-\u9fff]")
KANA = re.compile(r"[\u3040-\u30ff]")
_TO_SIMPLIFIED = opencc.OpenCC("t2s")


_ENGLISH = frozenset({"the", "and", "of", "to", "a", "an", "is", "with", "for", "this", "its", "or", "in", "be"})


def english_lines(text: str) -> list[str]:
    """Lines that read as English sentences: two or more of its commonest words (flags, names, codes and
    examples, which stay as they are in every language, have none)."""
    return [line for line in text.splitlines() if sum(word in _ENGLISH for word in re.findall(r"[a-z]+", line)) >= 2]


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_a_korean_locale_gives_korean_help_in_a_real_process() -> None:
    done = cli_process("--help", env={"LANG": "ko_KR.UTF-8", "LC_ALL": "", "LANGUAGE": ""})
    assert done.code == 0 and done.stderr == ""
    assert done.stdout.startswith("사용법: ")  # then the program's name as this process was started
    assert "옵션:" in done.stdout and "명령:" in done.stdout and "이 도움말을 보여 주고 끝냅니다." in done.stdout
    assert english_lines(done.stdout) == [] and HANGUL.search(done.stdout)


def test_a_subcommands_help_its_options_and_clicks_notes_are_translated(tmp_path: Path) -> None:
    done = cli("bind", "--help", env={"LANG": "ko_KR.UTF-8"})
    assert done.code == 0
    shown = _flat(done.stdout)
    assert "이 메모리를 소유한 조직" in shown and "[환경 변수: ENGRAM_HOME]" in shown


def test_review_list_and_an_error_speak_korean(tmp_path: Path) -> None:
    home = make_home(tmp_path / "home")
    listed = cli("review", "list", "--home", home.home, env={"LANG": "ko_KR.UTF-8"})
    assert listed.code == 0 and listed.stdout == "검토를 기다리는 후보가 없습니다\n"
    failed = cli(
        "records", "show", "mem_nothere", "--text", "--home", tmp_path / "nowhere", env={"LANG": "ko_KR.UTF-8"}
    )
    line = assert_one_line_failure(failed)
    assert line.startswith("engram-memory: 오류: ") and HANGUL.search(line.removeprefix("engram-memory: 오류: ")), line


def test_clicks_usage_errors_are_said_in_the_persons_language() -> None:
    assert assert_one_line_failure(cli("nosuch", env={"LANG": "ko_KR.UTF-8"})) == (
        "engram-memory: 오류: 'nosuch' 명령이 없습니다."
    )
    missing = assert_one_line_failure(cli("export", "--format", env={"LANG": "ja_JP.UTF-8"}))
    assert missing == "engram-memory: エラー: オプション '--format' には値が必要です。"
    bad = assert_one_line_failure(cli("console", "--port", "many", env={"LANGUAGE": "zh_CN"}))
    assert bad == "engram-memory：错误：'--port' 的值无效：需要一个整数。"
    too_big = assert_one_line_failure(cli("console", "--port", "70000", env={"LANG": "ko_KR.UTF-8"}))
    assert too_big == "engram-memory: 오류: '--port'의 값이 잘못되었습니다: 65535 이하여야 합니다."


def test_lang_asks_for_simplified_chinese_anywhere_on_the_line(tmp_path: Path) -> None:
    home = make_home(tmp_path / "home")
    for arguments in (("--lang", "zh-Hans", "--help"), ("--help", "--lang=zh-Hans")):
        shown = cli(*arguments, env={"LANG": "ko_KR.UTF-8"})
        assert shown.code == 0 and shown.stdout.startswith("用法：engram-memory")
        assert "显示此帮助并退出。" in shown.stdout
        assert _TO_SIMPLIFIED.convert(shown.stdout) == shown.stdout  # no Traditional-only character
    listed = cli("review", "list", "--home", home.home, "--lang", "zh-Hans")
    assert listed.stdout == "没有等待审核的候选\n"


def test_taiwan_and_japan_get_traditional_chinese_and_japanese() -> None:
    traditional = cli("--help", env={"LC_ALL": "zh_TW.UTF-8"}).stdout
    assert (
        traditional.startswith("用法：")
        and "顯示" in traditional
        and _TO_SIMPLIFIED.convert(traditional) != traditional
    )
    japanese = cli("--help", env={"LC_MESSAGES": "ja_JP.UTF-8", "LANG": "C.UTF-8"}).stdout
    assert japanese.startswith("使い方: engram-memory") and KANA.search(japanese)


def test_english_stays_the_default_for_c_and_unknown_locales() -> None:
    for env in ({"LANG": "C.UTF-8"}, {"LANG": "fr_FR.UTF-8"}, {"LANG": "", "LC_ALL": "POSIX"}):
        assert cli("--help", env=env).stdout.startswith("Usage: engram-memory"), env


def test_a_language_the_host_does_not_speak_is_refused_naming_the_choices() -> None:
    line = assert_one_line_failure(cli("--lang", "fr", "--help"))
    assert line == "engram-memory: error: --lang takes one of en, ko, zh-Hans, zh-Hant, ja, not 'fr'"
    assert assert_one_line_failure(cli("--help", "--lang")).startswith("engram-memory: error: --lang takes one of")


def test_dates_are_written_as_the_persons_language_writes_them(sqlite_paths: HostPaths) -> None:
    arguments = ("bind", "--tenant", "t", "--workspace", "w", "--principal", "p", "--agent", "a", "--session", "s")
    english = cli(*arguments, "--purpose", "purpose:x", "--home", sqlite_paths.home)
    assert re.search(r"expires \d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z", english.stderr), english.stderr
    korean = cli(*arguments, "--purpose", "purpose:x", "--home", sqlite_paths.home, env={"LANG": "ko_KR.UTF-8"})
    korean_date = r"\d{4}\. \d{1,2}\. \d{1,2}\. (오전|오후) \d{1,2}:\d{2}:\d{2} UTC"
    assert re.search(f"만료 {korean_date}", korean.stderr), korean.stderr
    listed = cli("bindings", "list", "--home", sqlite_paths.home, env={"LANG": "ko_KR.UTF-8"}).stdout
    assert re.search(f"발급 {korean_date}", listed), listed
    japanese = cli("bindings", "list", "--home", sqlite_paths.home, "--lang", "ja").stdout
    assert re.search(r"発行 \d{4}/\d{2}/\d{2} \d{2}:\d{2}:\d{2} UTC", japanese), japanese


@pytest.mark.parametrize("language", ["ko", "zh-Hans", "zh-Hant", "ja"])
def test_every_commands_help_is_in_the_language_asked_for(language: str) -> None:
    """Each command's help, not only the top level's: no help text is left behind in English."""
    script = {"ko": HANGUL, "ja": KANA}.get(language, HAN)
    groups = ("", "access", "bindings", "confirmations", "people", "records", "review", "tenants", "recovery-key")
    for group in groups:
        shown = cli(*([group] if group else []), "--help", "--lang", language)
        assert shown.code == 0 and script.search(shown.stdout), shown
        assert english_lines(shown.stdout) == [], (group, shown.stdout)
    for command in (("bind",), ("serve",), ("records", "list"), ("review", "accept"), ("access", "check")):
        shown = cli(*command, "--help", "--lang", language)
        assert english_lines(shown.stdout) == [], (command, shown.stdout)


def test_the_english_sentence_detector_sees_english() -> None:
    assert english_lines(
        "  --home  The host's home folder, for the subcommand.\n  --json  기계가 읽을 수 있는 출력."
    ) == ["  --home  The host's home folder, for the subcommand."]


@pytest.mark.stdio
def test_what_a_client_reads_stays_in_english_whatever_the_hosts_locale(sqlite_paths: HostPaths) -> None:
    """A refused stdio connection's reason reaches the agent's client: it is the contract's English."""
    korean = {"LANG": "ko_KR.UTF-8"}
    message = refusal_message(lambda: StdioAgent(sqlite_paths.home, None, extra_env=korean))
    assert message == (
        "Trusted invocation context unavailable: no binding given (--binding, --binding-file or ENGRAM_BINDING)"
    )
    forged = refusal_message(lambda: StdioAgent(sqlite_paths.home, "eyJ.eyJ.sig", extra_env=korean))
    assert forged.startswith("Trusted invocation context unavailable: the binding") and not HANGUL.search(forged)


def test_a_records_fields_are_named_in_the_language_and_stay_keys_in_english(paths: HostPaths) -> None:
    (record_id,) = remember(paths, "The kestrel gateway drains before deploys.")
    korean = cli("records", "show", record_id, "--home", paths.home, env={"LANG": "ko_KR.UTF-8"}).stdout
    assert f"레코드 ID: {record_id}" in korean and "이력:" in korean
    english = cli("records", "show", record_id, "--home", paths.home).stdout
    assert f"record_id: {record_id}" in english and "state: accepted_current" in english
