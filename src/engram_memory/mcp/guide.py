"""The agent guide as an MCP prompt (`memory_guide`): when to remember, search first, admission is asked
for, never secrets. In the four languages the server searches; a client shows it to its user or puts it
in the model's context on request, so it costs no tokens on turns that do not ask for it."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

import mcp_types as types

GUIDE_PROMPT = "memory_guide"
LANGUAGES = ("en", "ko", "zh", "ja")

_EN = (
    "How to use engram memory.\n"
    "1. Remember what a later session or another agent will need: decisions with their reasons, verified "
    "facts with their sources, conventions, recurring pitfalls and their fixes, hand-off facts. Not scratch "
    "state, chat logs, raw tool output, guesses.\n"
    "2. Search before you capture: if it is already there, use it (and cite its record_id) instead of "
    "writing it again.\n"
    "3. A capture is only a pending draft. Ask for admission (engram_memory_request_admission) and report "
    "the outcome as it is, with its reasons: accepted, rejected, pending_adjudication (a person decides: "
    "repeat the same call, same idempotency_key, later to learn their decision) or duplicate_exact (the same "
    "text is already a memory: its record_id).\n"
    "4. Never store secrets: no passwords, tokens, keys, connection strings or .env values.\n"
    "5. Withdraw and forget need a person's approval: on gate_failed give the user error.for_the_person "
    "(it names the confirmation request), and once they approved, repeat the identical call with the same "
    "idempotency_key.\n"
    "6. Act on error.code and error.retriable; retry a retriable error with the same idempotency_key and "
    "arguments. On INVALID_SCHEMA or INVALID_DIGEST the message names each faulty field (a JSON pointer such as "
    "/payload/valid_time/t) and its rule: fix exactly that. Times are epoch milliseconds, not seconds.\n"
    "7. When a fact can change (who owns a service, a release date), name it as a family in "
    "payload.reconciliation.family_refs (e.g. fact:release-date) when the host consents: the host's rules may "
    "make the older memory historical on admission (the outcome lists superseded_record_ids; search and get "
    "then return only the new one) or ask a person first. Never rewrite a memory to get around that."
)

_KO = (
    "engram 메모리 사용법.\n"
    "1. 나중의 세션이나 다른 에이전트에게 필요한 것을 기억하세요: 이유가 있는 결정, 출처가 확인된 사실, 규칙, "
    "반복되는 함정과 해결책, 인수인계 사항. 임시 상태, 대화 기록, 도구의 원시 출력, 추측은 저장하지 마세요.\n"
    "2. 저장하기 전에 먼저 검색하세요: 이미 있으면 다시 쓰지 말고 그 record_id를 인용하세요.\n"
    "3. capture는 대기 중인 초안일 뿐입니다. engram_memory_request_admission으로 승인을 요청하고 결과를 있는 "
    "그대로, 이유(reasons)와 함께 보고하세요: accepted, rejected, pending_adjudication(사람이 결정: 나중에 같은 "
    "idempotency_key로 같은 호출을 다시 하면 그 결정을 알 수 있음), duplicate_exact(같은 텍스트가 이미 기억에 "
    "있음: 그 record_id).\n"
    "4. 비밀 정보는 절대 저장하지 마세요: 비밀번호, 토큰, 키, 연결 문자열, .env 값.\n"
    "5. withdraw와 forget은 사람의 승인이 필요합니다: gate_failed가 오면 error.for_the_person(확인 요청 ID "
    "포함)을 사용자에게 전하고, 승인 후 같은 idempotency_key로 똑같은 호출을 다시 하세요.\n"
    "6. error.code와 error.retriable에 따라 행동하세요; 재시도 가능한 오류는 같은 idempotency_key와 인자로 "
    "다시 시도하세요. INVALID_SCHEMA나 INVALID_DIGEST의 메시지는 잘못된 필드(/payload/valid_time/t 같은 JSON "
    "포인터)와 규칙을 알려 줍니다: 바로 그것을 고치세요. 시간은 초가 아니라 epoch 밀리초입니다.\n"
    "7. 바뀔 수 있는 사실(서비스 담당자, 출시일 등)은 호스트가 동의한 경우 payload.reconciliation.family_refs에 "
    "패밀리로 지정하세요(예: fact:release-date): 호스트 규칙에 따라 승인 시 예전 기억이 historical이 되거나"
    "(결과의 superseded_record_ids에 표시되고, 이후 search와 get은 새 기억만 반환) 사람이 먼저 판단합니다. "
    "이를 피하려고 기억을 고쳐 쓰지 마세요."
)

_ZH = (
    "engram 记忆的用法。\n"
    "1. 记住以后的会话或其他智能体需要的内容：附带理由的决定、有来源的已核实事实、约定、"
    "反复出现的陷阱及其解决办法、交接事项。不要保存临时状态、聊天记录、工具的原始输出或猜测。\n"
    "2. 保存之前先搜索：如果已经存在，就引用它的 record_id，不要重复写入。\n"
    "3. capture 只是待审的草稿。用 engram_memory_request_admission 申请收录，并如实报告结果：accepted、"
    "rejected、pending_adjudication（由人决定：稍后用同一个 idempotency_key 重复同一调用即可得知其决定）或 "
    "duplicate_exact（相同文本已是一条记忆：返回其 record_id），并附上 reasons。\n"
    "4. 绝不保存机密：密码、令牌、密钥、连接字符串或 .env 的值。\n"
    "5. withdraw 和 forget 需要人的批准：收到 gate_failed 时把 error.for_the_person（含确认请求 ID）转告用户，"
    "批准后用同一个 idempotency_key 重复完全相同的调用。\n"
    "6. 依据 error.code 和 error.retriable 行事；可重试的错误请用相同的 idempotency_key 和参数重试。"
    "INVALID_SCHEMA 或 INVALID_DIGEST 的信息会指出出错的字段（如 /payload/valid_time/t 这样的 JSON 指针）"
    "及其规则：只改那里。时间是 epoch 毫秒，不是秒。\n"
    "7. 会变化的事实（服务负责人、发布日期等），在主机同意时用 payload.reconciliation.family_refs 标为一个家族"
    "（例如 fact:release-date）：主机的规则可能在收录时把旧记忆变为 historical（结果中的 superseded_record_ids "
    "会列出，之后 search 和 get 只返回新的），或先交给人决定。不要为了绕开它而改写记忆。"
)

_JA = (
    "engram メモリの使い方。\n"
    "1. 後のセッションや他のエージェントが必要とするものを記憶してください：理由のある決定、"
    "出典のある確認済みの事実、規約、繰り返し起きる落とし穴とその対処、引き継ぎ事項。一時的な状態、チャットログ、ツールの生の出力、推測は"
    "保存しないでください。\n"
    "2. 保存する前に検索してください：すでにあれば書き直さず、その record_id を引用してください。\n"
    "3. capture は保留中の下書きにすぎません。engram_memory_request_admission で採用を依頼し、結果をそのまま"
    "reasons とともに報告してください：accepted、rejected、pending_adjudication（人が判断：後で同じ "
    "idempotency_key で同じ呼び出しを繰り返すとその判断がわかる）、duplicate_exact（同じテキストがすでに記憶に"
    "ある：その record_id）。\n"
    "4. 秘密は決して保存しないでください：パスワード、トークン、鍵、接続文字列、.env の値。\n"
    "5. withdraw と forget には人の承認が必要です：gate_failed が返ったら error.for_the_person（確認リクエスト"
    "の ID を含む）をユーザーに伝え、承認後に同じ idempotency_key でまったく同じ呼び出しを繰り返してください。\n"
    "6. error.code と error.retriable に従って行動してください；再試行可能なエラーは同じ idempotency_key と"
    "引数で再試行してください。INVALID_SCHEMA や INVALID_DIGEST のメッセージは誤ったフィールド"
    "（/payload/valid_time/t のような JSON ポインタ）と規則を示します：そこだけを直してください。"
    "時刻は秒ではなく epoch ミリ秒です。\n"
    "7. 変わりうる事実（サービスの担当者、リリース日など）は、ホストが同意していれば "
    "payload.reconciliation.family_refs にファミリーとして指定してください（例：fact:release-date）："
    "ホストのルールにより、採用時に古い記憶が historical になる（結果の superseded_record_ids に示され、"
    "以後 search と get は新しい記憶だけを返す）か、先に人が判断します。"
    "それを避けるために記憶を書き換えないでください。"
)

GUIDES: Mapping[str, str] = MappingProxyType({"en": _EN, "ko": _KO, "zh": _ZH, "ja": _JA})

PROMPT = types.Prompt(
    name=GUIDE_PROMPT,
    title="How to use engram memory",
    description="The agent guide: what to remember, search first, admission, never secrets, approvals, families.",
    arguments=[types.PromptArgument(name="language", description="en (default), ko, zh or ja", required=False)],
)


def guide(language: str | None) -> types.GetPromptResult | None:
    """The guide in `language` (English when absent); None for a language it is not written in."""
    text = GUIDES.get(language or "en")
    if text is None:
        return None
    message = types.PromptMessage(role="user", content=types.TextContent(type="text", text=text))
    return types.GetPromptResult(description=PROMPT.description, messages=[message])
