# ruff: noqa: RUF001 - Chinese and Japanese text carries full-width punctuation on purpose
"""Staying true: facts that change, among distractors, in several workspaces and languages (issue 20).

Generates, from a seed, conversations in LoCoMo format where facts are stated once and revised one to
three times in later sessions (English, Korean, Simplified Chinese and Japanese phrasing; several
workspaces per language, reusing the same family refs so that a family never reaches across them), and
asks one question per fact ("what is the X?"). Each turn is captured and admitted through the engine as
an agent would (bench/locomo.py's memory shape: "speaker: text", the two turns before as context); a
turn that states a fact names its family (`fact:NN`) in `reconciliation.family_refs`.

Two runs on fresh embedded homes, the same turns: with families (consented, `[[family_rules]]
pattern = "fact:*" mode = "supersede"`) and without (the baseline: no family refs). A probe is one search
(limit 10) in its workspace; it scores whether the fact's latest statement is the top hit
(`current_top1_pct`) and whether any earlier statement of it is among the ten
(`superseded_in_top10_pct`).

    .venv/bin/python bench/updates.py [--json] [--seed N] [--workspaces N] [--facts N]
                                      [--channels lexical|hybrid] [--write DIR]

`--write DIR` also writes the generated conversations (LoCoMo JSON; each fact turn carries its `family`,
each question its `superseded_evidence`). Results: docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from engram_memory.engine.engine import Engine
from engram_memory.host.compose import init_home, open_engine
from engram_memory.host.policy_file import DEFAULT_POLICY_TOML
from engram_memory.host.settings import HostPaths
from harness import bench_binding, value_of
from locomo import CONTEXT_TURNS, Turn, capture_arguments

PURPOSE = "purpose:conversation-memory"
DAY_MS = 86_400_000
START_MS = 1_735_689_600_000  # 2025-01-01T00:00:00Z
SESSIONS = 8
LIMIT = 10

# (subject, value kind) per language; the subjects of one language share words on purpose (two on-call
# leads, two rooms), as real teams' facts do.
SUBJECTS: dict[str, list[tuple[str, str]]] = {
    "en": [
        ("deploy window", "day"),
        ("on-call lead for payments", "person"),
        ("on-call lead for search", "person"),
        ("release branch cut day", "day"),
        ("API rate limit", "number"),
        ("retro meeting room", "room"),
        ("planning meeting room", "room"),
        ("staging database host", "host"),
        ("log retention period", "days"),
        ("code freeze day", "day"),
        ("security review owner", "person"),
        ("build cache size", "number"),
        ("incident commander rotation lead", "person"),
        ("metrics dashboard host", "host"),
        ("backup start day", "day"),
        ("design review room", "room"),
        ("support escalation contact", "person"),
        ("queue worker count", "number"),
        ("feature flag cleanup day", "day"),
        ("audit log retention", "days"),
    ],
    "ko": [
        ("배포 요일", "day"),
        ("결제팀 당직 책임자", "person"),
        ("검색팀 당직 책임자", "person"),
        ("릴리스 브랜치 생성 요일", "day"),
        ("API 호출 한도", "number"),
        ("회고 회의실", "room"),
        ("기획 회의실", "room"),
        ("스테이징 데이터베이스 서버", "host"),
        ("로그 보관 기간", "days"),
        ("코드 동결 요일", "day"),
        ("보안 검토 담당자", "person"),
        ("빌드 캐시 크기", "number"),
        ("장애 대응 책임자", "person"),
        ("지표 대시보드 서버", "host"),
        ("백업 시작 요일", "day"),
        ("디자인 리뷰 회의실", "room"),
        ("고객 지원 연락 담당자", "person"),
        ("큐 작업자 수", "number"),
        ("기능 플래그 정리 요일", "day"),
        ("감사 로그 보관 기간", "days"),
    ],
    "zh": [
        ("部署日", "day"),
        ("支付组值班负责人", "person"),
        ("搜索组值班负责人", "person"),
        ("发布分支切出日", "day"),
        ("接口调用上限", "number"),
        ("复盘会议室", "room"),
        ("规划会议室", "room"),
        ("预发数据库主机", "host"),
        ("日志保留期限", "days"),
        ("代码冻结日", "day"),
        ("安全评审负责人", "person"),
        ("构建缓存大小", "number"),
        ("故障指挥负责人", "person"),
        ("监控看板主机", "host"),
        ("备份开始日", "day"),
        ("设计评审会议室", "room"),
        ("客服升级联系人", "person"),
        ("队列工作进程数", "number"),
        ("功能开关清理日", "day"),
        ("审计日志保留期限", "days"),
    ],
    "ja": [
        ("デプロイ曜日", "day"),
        ("決済チームの当番責任者", "person"),
        ("検索チームの当番責任者", "person"),
        ("リリースブランチ作成曜日", "day"),
        ("API呼び出し上限", "number"),
        ("振り返り会議室", "room"),
        ("計画会議室", "room"),
        ("ステージングデータベースのホスト", "host"),
        ("ログ保存期間", "days"),
        ("コードフリーズ曜日", "day"),
        ("セキュリティレビュー担当者", "person"),
        ("ビルドキャッシュの容量", "number"),
        ("障害対応責任者", "person"),
        ("メトリクスダッシュボードのホスト", "host"),
        ("バックアップ開始曜日", "day"),
        ("デザインレビュー会議室", "room"),
        ("サポートのエスカレーション窓口", "person"),
        ("キューのワーカー数", "number"),
        ("フィーチャーフラグ整理曜日", "day"),
        ("監査ログ保存期間", "days"),
    ],
}

VALUES: dict[str, dict[str, list[str]]] = {
    "en": {
        "day": ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"],
        "person": ["Priya", "Marcus", "Elena", "Tomás", "Aiko", "Jonah", "Fatima", "Lukas"],
        "room": ["Room 4B", "the Atlas room", "Room 12", "the Harbor room", "Room 7A"],
        "days": ["30 days", "90 days", "14 days", "180 days", "60 days"],
    },
    "ko": {
        "day": ["월요일", "화요일", "수요일", "목요일", "금요일"],
        "person": ["김민준", "이서연", "박지훈", "최유나", "정하늘", "한도윤", "오세린", "강태오"],
        "room": ["4B 회의실", "아틀라스 회의실", "12번 회의실", "하버 회의실", "7A 회의실"],
        "days": ["30일", "90일", "14일", "180일", "60일"],
    },
    "zh": {
        "day": ["星期一", "星期二", "星期三", "星期四", "星期五"],
        "person": ["王伟", "李娜", "张磊", "刘洋", "陈静", "赵敏", "孙浩", "周婷"],
        "room": ["4B会议室", "阿特拉斯会议室", "12号会议室", "海港会议室", "7A会议室"],
        "days": ["30天", "90天", "14天", "180天", "60天"],
    },
    "ja": {
        "day": ["月曜日", "火曜日", "水曜日", "木曜日", "金曜日"],
        "person": ["佐藤", "鈴木", "高橋", "田中", "伊藤", "渡辺", "山本", "中村"],
        "room": ["4B会議室", "アトラス会議室", "12番会議室", "ハーバー会議室", "7A会議室"],
        "days": ["30日", "90日", "14日", "180日", "60日"],
    },
}
NUMBERS = ["200", "350", "500", "800", "1200", "64", "16", "24"]
HOSTS = ["db-7.internal", "db-12.internal", "pg-east-3", "pg-west-1", "metrics-2", "metrics-9"]

SPEAKERS = {"en": ("Dana", "Sam"), "ko": ("지수", "현우"), "zh": ("小林", "阿杰"), "ja": ("美咲", "大輔")}

CHATTER: dict[str, list[str]] = {
    "en": [
        "Did anyone try the new coffee place downstairs?",
        "I'm out on Friday afternoon, back on Monday.",
        "The onboarding doc needs screenshots again.",
        "Lunch order goes in at noon today.",
        "Can someone review my pull request when they have a minute?",
        "The office plants look thirsty.",
        "I moved the team photo to the shared drive.",
        "Reminder to update your timesheets this week.",
        "The projector in the big room is flaky again.",
        "Great demo yesterday, everyone.",
        "Who is bringing snacks to the offsite?",
        "My laptop finally got the new keyboard.",
    ],
    "ko": [
        "아래층 새 카페 가 본 사람 있어요?",
        "금요일 오후에는 자리를 비워요, 월요일에 돌아옵니다.",
        "온보딩 문서에 스크린샷을 다시 넣어야 해요.",
        "오늘 점심 주문은 정오에 넣어요.",
        "시간 될 때 제 풀 리퀘스트 좀 봐 주세요.",
        "사무실 화분에 물을 줘야 할 것 같아요.",
        "팀 사진을 공유 드라이브로 옮겼어요.",
        "이번 주에 근무 시간 기록 잊지 마세요.",
        "큰 회의실 프로젝터가 또 말썽이에요.",
        "어제 데모 정말 좋았어요.",
        "워크숍에 간식은 누가 가져와요?",
        "노트북 키보드를 드디어 새로 받았어요.",
    ],
    "zh": [
        "有人去过楼下新开的咖啡店吗？",
        "我周五下午不在，周一回来。",
        "入职文档又需要补截图了。",
        "今天的午饭十二点前下单。",
        "有空的时候帮我看一下合并请求吧。",
        "办公室的绿植好像该浇水了。",
        "我把团队合照放到共享盘了。",
        "提醒大家这周记得填工时。",
        "大会议室的投影仪又出问题了。",
        "昨天的演示很精彩。",
        "团建谁带零食？",
        "我的笔记本终于换了新键盘。",
    ],
    "ja": [
        "下の新しいカフェに行った人いますか？",
        "金曜の午後は不在で、月曜に戻ります。",
        "オンボーディング資料にまたスクリーンショットが必要です。",
        "今日のお昼の注文は正午までです。",
        "時間があるときにプルリクエストを見てもらえますか。",
        "オフィスの植物に水をあげたほうがよさそうです。",
        "チーム写真を共有ドライブに移しました。",
        "今週は勤怠の入力を忘れずに。",
        "大会議室のプロジェクターがまた調子悪いです。",
        "昨日のデモ、とてもよかったです。",
        "合宿のおやつは誰が持ってきますか？",
        "ノートPCのキーボードがやっと新しくなりました。",
    ],
}


def _topic(subject: str) -> str:
    """A Korean subject with its topic particle (은 after a final consonant, else 는)."""
    last = subject[-1]
    if "가" <= last <= "힣":
        return subject + ("은" if (ord(last) - 0xAC00) % 28 else "는")
    return subject + "은"


def _stated(language: str, subject: str, value: str, revision: int) -> str:
    if language == "en":
        return (
            f"Just so we all know, the {subject} is {value}."
            if revision == 0
            else f"Heads up, the {subject} changed: it is {value} from now on."
        )
    if language == "ko":
        return (
            f"참고로 {_topic(subject)} {value}입니다."
            if revision == 0
            else f"변경 사항이 있어요. 이제부터 {_topic(subject)} {value}입니다."
        )
    if language == "zh":
        return f"提醒一下，{subject}是{value}。" if revision == 0 else f"更新一下，{subject}改了，从现在起是{value}。"
    return (
        f"共有です。{subject}は{value}です。" if revision == 0 else f"変更です。これから{subject}は{value}になります。"
    )


def _asked(language: str, subject: str) -> str:
    if language == "en":
        return f"What is the {subject}?"
    if language == "ko":
        return f"{_topic(subject)} 무엇인가요?"
    if language == "zh":
        return f"{subject}是什么？"
    return f"{subject}は何ですか？"


def _value(language: str, kind: str, rng: random.Random, avoid: set[str]) -> str:
    pool = NUMBERS if kind == "number" else HOSTS if kind == "host" else VALUES[language][kind]
    return rng.choice([value for value in pool if value not in avoid])


@dataclass(frozen=True)
class Probe:
    question: str
    current: str  # the dia_id of the fact's latest statement
    superseded: frozenset[str]  # the dia_ids of its earlier statements


@dataclass(frozen=True)
class Workspace:
    name: str
    language: str
    turns: list[Turn]
    families: dict[str, str]  # dia_id -> family ref, for the turns that state a fact
    probes: list[Probe]
    document: dict[str, Any]  # the LoCoMo file


def generate(rng: random.Random, name: str, language: str, facts: int) -> Workspace:
    """One conversation: each fact stated in an early session and revised 1-3 times later, among chatter."""
    subjects = rng.sample(SUBJECTS[language], min(facts, len(SUBJECTS[language])))
    plan: dict[int, list[tuple[str, int, str, str]]] = {s: [] for s in range(1, SESSIONS + 1)}
    latest: dict[str, str] = {}  # family -> the value its last statement gives
    for number, (subject, kind) in enumerate(subjects):
        revisions = rng.randint(1, 3)
        sessions = sorted(rng.sample(range(1, SESSIONS + 1), revisions + 1))
        used: set[str] = set()
        for revision, session in enumerate(sessions):
            value = _value(language, kind, rng, used)
            used.add(value)
            latest[f"fact:{number:02d}"] = value
            plan[session].append((f"fact:{number:02d}", revision, subject, _stated(language, subject, value, revision)))
    a, b = SPEAKERS[language]
    turns: list[Turn] = []
    families: dict[str, str] = {}
    statements: dict[str, list[str]] = {}
    document: dict[str, Any] = {"speaker_a": a, "speaker_b": b}
    for session in range(1, SESSIONS + 1):
        at_ms = START_MS + (session - 1) * 7 * DAY_MS
        lines: list[tuple[str | None, str]] = [(None, text) for text in rng.sample(CHATTER[language], 3)]
        lines += [(family, text) for family, _revision, _subject, text in plan[session]]
        rng.shuffle(lines)
        when = datetime.fromtimestamp(at_ms / 1000, UTC)  # LoCoMo's spelling: "1:56 pm on 8 May, 2023"
        document[f"session_{session}_date_time"] = f"{when:%-I:%M} {when:%p}".lower() + f" on {when.day} {when:%B, %Y}"
        entries = []
        for n, (family, text) in enumerate(lines, start=1):
            dia_id = f"D{session}:{n}"
            speaker = a if n % 2 else b
            turns.append(Turn(session, dia_id, speaker, text, at_ms + n * 1_000))
            entry: dict[str, Any] = {"speaker": speaker, "dia_id": dia_id, "text": text}
            if family is not None:
                families[dia_id] = family
                statements.setdefault(family, []).append(dia_id)
                entry["family"] = family
            entries.append(entry)
        document[f"session_{session}"] = entries
    probes = []
    qa = []
    for number, (subject, _kind) in enumerate(subjects):
        said = statements[f"fact:{number:02d}"]
        probes.append(Probe(_asked(language, subject), said[-1], frozenset(said[:-1])))
        qa.append(
            {
                "question": _asked(language, subject),
                "answer": latest[f"fact:{number:02d}"],
                "evidence": [said[-1]],
                "superseded_evidence": said[:-1],
                "category": 1,
            }
        )
    document["qa"] = qa
    return Workspace(name, language, turns, families, probes, document)


def generate_all(seed: int, per_language: int, facts: int) -> list[Workspace]:
    rng = random.Random(seed)
    return [generate(rng, f"{language}-{n + 1}", language, facts) for language in SUBJECTS for n in range(per_language)]


def _policy(paths: HostPaths) -> None:
    text = DEFAULT_POLICY_TOML.replace("consented_families = []", 'consented_families = ["fact:*"]')
    paths.policy.write_text(text + '\n[[family_rules]]\npattern = "fact:*"\nmode = "supersede"\n', encoding="utf-8")


def _ingest(engine: Engine, binding: Any, workspace: Workspace, *, families: bool) -> dict[str, str]:
    """Captures and admits every turn; the record id -> dia_id of the accepted ones."""
    dia_of: dict[str, str] = {}
    for t, turn in enumerate(workspace.turns):
        before = [e for e in workspace.turns[max(0, t - CONTEXT_TURNS) : t] if e.session == turn.session]
        arguments = capture_arguments(turn, before, f"updates-capture-{workspace.name}-{t:05d}")
        family = workspace.families.get(turn.dia_id)
        if families and family is not None:
            arguments["payload"]["reconciliation"] = {"family_refs": [family]}
        captured = value_of(engine, binding, "engram_memory_capture", arguments)
        admit = {"candidate_id": captured["candidate_id"], "idempotency_key": f"updates-admit-{workspace.name}-{t:05d}"}
        outcome = value_of(engine, binding, "engram_memory_request_admission", admit)["outcome"]
        if outcome["status"] != "accepted":
            raise SystemExit(f"turn {turn.dia_id} of {workspace.name} was {outcome['status']}, not accepted")
        dia_of[outcome["record_id"]] = turn.dia_id
    return dia_of


def run(workspaces: list[Workspace], *, families: bool, channels: str) -> dict[str, Any]:
    top1: list[bool] = []
    stale: list[bool] = []
    by_language: dict[str, list[bool]] = {}
    with tempfile.TemporaryDirectory(prefix="engram-updates-") as scratch:
        paths = HostPaths(home=Path(scratch) / "home")
        init_home(paths)
        if families:
            _policy(paths)
        with open_engine(paths, semantic=channels == "hybrid") as engine:
            if channels == "hybrid" and engine.deps.semantic is None:
                raise SystemExit("--channels hybrid needs the semantic extra: pip install '.[semantic]'")
            for workspace in workspaces:
                binding = bench_binding(paths, tenant="updates", workspace=workspace.name, purpose=PURPOSE)
                dia_of = _ingest(engine, binding, workspace, families=families)
                if engine.deps.indexer is not None:
                    engine.deps.indexer.settle()
                for probe in workspace.probes:
                    arguments = {"query": probe.question, "purpose_ref": PURPOSE, "limit": LIMIT}
                    value = value_of(engine, binding, "engram_memory_search", arguments)
                    found = [dia_of.get(packet["record"]["record_id"], "") for packet in value["records"]]
                    first = bool(found) and found[0] == probe.current
                    top1.append(first)
                    stale.append(bool(probe.superseded & set(found)))
                    by_language.setdefault(workspace.language, []).append(first)
    return {
        "current_top1_pct": round(100 * sum(top1) / len(top1), 1),
        "superseded_in_top10_pct": round(100 * sum(stale) / len(stale), 1),
        "current_top1_pct_by_language": {
            language: round(100 * sum(hits) / len(hits), 1) for language, hits in sorted(by_language.items())
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    parser.add_argument("--seed", type=int, default=20, help="the generator's seed (default 20)")
    parser.add_argument("--workspaces", type=int, default=2, help="workspaces per language (default 2)")
    parser.add_argument("--facts", type=int, default=20, help="facts per workspace, at most 20 (default 20)")
    parser.add_argument("--channels", choices=("lexical", "hybrid"), default="lexical")
    parser.add_argument("--write", type=Path, help="also write the generated conversations (LoCoMo JSON) here")
    args = parser.parse_args(argv)
    workspaces = generate_all(args.seed, args.workspaces, args.facts)
    if args.write is not None:
        args.write.mkdir(parents=True, exist_ok=True)
        for workspace in workspaces:
            target = args.write / f"{workspace.name}.json"
            target.write_text(json.dumps(workspace.document, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    started = time.perf_counter()
    with_families = run(workspaces, families=True, channels=args.channels)
    baseline = run(workspaces, families=False, channels=args.channels)
    result: dict[str, Any] = {
        "seed": args.seed,
        "channels": args.channels,
        "workspaces": len(workspaces),
        "languages": sorted({w.language for w in workspaces}),
        "probes": sum(len(w.probes) for w in workspaces),
        "turns": sum(len(w.turns) for w in workspaces),
        **with_families,
        **{f"baseline_{key}": value for key, value in baseline.items()},
        "seconds": round(time.perf_counter() - started, 1),
    }
    if args.json:
        sys.stdout.write(json.dumps(result, ensure_ascii=False) + "\n")
        return 0
    print(f"{result['probes']} probes, {result['turns']} turns, {result['workspaces']} workspaces ({args.channels})")
    print("| | current top-1 % | superseded in top 10 % |\n|---|---|---|")
    print(f"| with families (supersede) | {result['current_top1_pct']} | {result['superseded_in_top10_pct']} |")
    print(
        f"| without (baseline) | {result['baseline_current_top1_pct']} | {result['baseline_superseded_in_top10_pct']} |"
    )
    for language, pct in result["current_top1_pct_by_language"].items():
        without = result["baseline_current_top1_pct_by_language"][language]
        print(f"  {language}: top-1 {pct} % with families, {without} % without")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
