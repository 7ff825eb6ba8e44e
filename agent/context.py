"""The context policy: keeps AgentState bounded however long a task runs (DESIGN §3).

- The leading system prompt and goal are pinned verbatim.
- The `recent_history_window` most recent messages stay verbatim.
- Every `summary_interval` model turns (or at once, when the history outgrows twice the
  window), older turns fold into a rolling summary: written by the model when its adapter can
  (`ModelAdapter.complete`), by a deterministic extractive digest otherwise or when that fails.
  The summary is capped at `summary_max_chars`.
- Hard facts in the folded messages (amounts, dates, ids, explicit user constraints) are kept
  verbatim in `AgentState.hard_facts`, at most `hard_facts_max` of them.
- A fold never separates an assistant tool-call message from its tool results.

The full transcript is not lost: it lives in the task's events.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from agent.llm.base import ModelAdapter, ModelDecision, ModelError
from harness_base.config import ContextConfig, compile_pattern
from tasks.agent_state import AgentState, Message
from tasks.spec import ContextSpec

# Messages the harness itself writes to the model (check feedback) carry this name: they are
# not user constraints.
HARNESS_AUTHOR = "harness"
CONSTRAINT_PREFIX = "constraint: "
FACT_MAX_CHARS = 200
DIGEST_ITEM_CHARS = 120
MODEL_PROMPT_MAX_CHARS = 16_000

_MONTH = (
    r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|"
    r"Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)"
)
# On RE2 (linear time): this runs over observations, which are hostile text. On Python's `re`
# the amounts alone took two minutes over a 64 KB observation of "1,1,1,…" (every digit a new
# start scanning the whole run).
FACT_PATTERN = compile_pattern(
    "|".join(
        [
            # amounts: $1,200.50  €30  12.5 EUR  300 dollars
            r"[$€£¥]\s?\d[\d,]*(?:\.\d+)?",
            r"\b\d[\d,]*(?:\.\d+)?\s?(?:USD|EUR|GBP|JPY|CHF|CAD|AUD|dollars?|euros?|pounds?)\b",
            # dates: 2024-07-15[T10:00]  15/07/2024  July 15, 2024  15 July 2024
            r"\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?)?\b",
            r"\b\d{1,2}/\d{1,2}/\d{2,4}\b",
            rf"\b{_MONTH}\.? \d{{1,2}}(?:st|nd|rd|th)?,? \d{{4}}\b",
            rf"\b\d{{1,2}} {_MONTH} \d{{4}}\b",
            # identifiers: UUIDs, INV-2031, ORDER-20-A, #4521
            r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b",
            r"\b[A-Z]{2,}[A-Z0-9]*-\d{2,}[\w-]*",
            r"(?:^|[^\w#])#\d{3,}\b",
        ]
    )
)
CONSTRAINT_PATTERN = re.compile(
    r"\b(?:must|never|do not|don't|always|only|at most|at least|no more than|no later than|"
    r"deadline|required|forbidden|not allowed)\b",
    re.IGNORECASE,
)
# Sentence ends, real newlines, and the escaped newlines of JSON-encoded observations.
_SEGMENT_SPLIT = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'(])|\n|\\n")


def context_policy(*, config: ContextConfig, override: ContextSpec | None) -> ContextConfig:
    """harness.yaml `context` with the task's own overrides applied."""
    if override is None:
        return config
    return ContextConfig.model_validate(
        {**config.model_dump(), **override.model_dump(exclude_none=True)}
    )


# --- hard facts -------------------------------------------------------------------------------


def _clip_around(segment: str, start: int, end: int) -> str:
    if len(segment) <= FACT_MAX_CHARS:
        return segment
    half = (FACT_MAX_CHARS - (end - start)) // 2
    lo = max(0, start - max(half, 0))
    return segment[lo : lo + FACT_MAX_CHARS]


def extract_facts(text: str, *, constraints: bool) -> list[str]:
    """The sentences (clipped to 200 characters) holding an amount, a date or an id, and,
    when `constraints`, the sentences stating a rule (must, never, only, at most, …)."""
    out: list[str] = []
    for raw in _SEGMENT_SPLIT.split(text):
        segment = raw.strip().strip('",{}[]').strip()
        if not segment:
            continue
        if constraints and CONSTRAINT_PATTERN.search(segment):
            out.append(CONSTRAINT_PREFIX + segment[:FACT_MAX_CHARS])
            continue
        match = FACT_PATTERN.search(segment)
        if match:
            out.append(_clip_around(segment, match.start(), match.end()).strip())
    return out


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for item in value.values() for s in _strings(item)]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    return []


def _message_facts(message: Message) -> list[str]:
    constraints = message.role == "user" and message.name != HARNESS_AUTHOR
    texts = [message.content]
    if message.role == "tool":
        # Observations are JSON: look inside its strings, not at its punctuation.
        try:
            texts = _strings(json.loads(message.content)) or texts
        except ValueError:
            pass
    return [fact for text in texts for fact in extract_facts(text, constraints=constraints)]


def merge_facts(existing: list[str], new: list[str], *, limit: int) -> list[str]:
    """Append unseen facts; over the limit, the oldest non-constraint facts go first."""
    facts = list(existing)
    seen = set(facts)
    for fact in new:
        if fact not in seen:
            facts.append(fact)
            seen.add(fact)
    while len(facts) > limit:
        victim = next((i for i, f in enumerate(facts) if not f.startswith(CONSTRAINT_PREFIX)), 0)
        facts.pop(victim)
    return facts


def goal_facts(goal: str, policy: ContextConfig) -> list[str]:
    """The hard facts a task starts with: the goal's amounts, dates, ids and constraints."""
    if not policy.hard_facts_keep:
        return []
    return merge_facts([], extract_facts(goal, constraints=True), limit=policy.hard_facts_max)


# --- folding ----------------------------------------------------------------------------------


def pinned_count(messages: list[Message]) -> int:
    """The leading system prompt and goal messages, never folded."""
    count = 0
    for message in messages:
        if message.role not in ("system", "user"):
            break
        count += 1
    return count


def fold_cut(messages: list[Message], *, pinned: int, window: int) -> int:
    """Index of the first message kept verbatim: about `window` from the end, moved back so
    it starts a turn (a tool result is never kept without the call it answers)."""
    cut = max(pinned, len(messages) - window)
    while cut > pinned and messages[cut].role == "tool":
        cut -= 1
    return cut


def needs_fold(state: AgentState, policy: ContextConfig) -> bool:
    movable = len(state.messages) - pinned_count(state.messages)
    if movable <= policy.recent_history_window:
        return False
    due = state.turn_index - state.folded_at_turn >= policy.summary_interval
    return due or movable > 2 * policy.recent_history_window


def _short(value: str, limit: int = DIGEST_ITEM_CHARS) -> str:
    value = " ".join(value.split())
    return value if len(value) <= limit else value[: limit - 1] + "…"


def digest(messages: list[Message], *, item_chars: int = DIGEST_ITEM_CHARS) -> list[str]:
    """One line per call (with its result), per model remark and per user message."""
    results = {m.call_id: m.content for m in messages if m.role == "tool"}
    lines: list[str] = []
    for message in messages:
        if message.role == "assistant":
            if message.content.strip():
                lines.append(f"- model: {_short(message.content, item_chars)}")
            for call in message.calls or []:
                args = _short(json.dumps(call.args, ensure_ascii=False, sort_keys=True), item_chars)
                result = _short(results.get(call.call_id, "(no result)"), item_chars)
                lines.append(f"- [{call.call_id}] {call.tool}({args}) -> {result}")
        elif message.role in ("user", "system"):
            who = "harness" if message.name == HARNESS_AUTHOR else message.role
            lines.append(f"- {who}: {_short(message.content, item_chars)}")
    return lines


def extractive_summary(previous: str, lines: list[str], *, max_chars: int) -> str:
    """The previous summary plus the new digest lines; over the cap, the oldest lines go."""
    kept = [line for line in previous.splitlines() if line and not line.startswith("(…")]
    kept += lines
    dropped = 0
    while kept and len("\n".join(kept)) + 40 > max_chars:
        kept.pop(0)
        dropped += 1
    head = [f"(… {dropped} older lines dropped)"] if dropped or previous.startswith("(…") else []
    return "\n".join(head + kept)[:max_chars]


SUMMARY_SYSTEM = (
    "You maintain the working memory of an AI agent. Merge the new turns into the running "
    "summary: what was done, what was found, what is still open. Keep amounts, dates, "
    "identifiers and the user's explicit constraints exactly as written. Plain text only."
)


def model_summary(
    model: ModelAdapter, *, previous: str, messages: list[Message], max_chars: int, timeout_s: float
) -> ModelDecision:
    transcript = "\n".join(digest(messages, item_chars=600))[-MODEL_PROMPT_MAX_CHARS:]
    prompt = (
        f"Running summary so far:\n{previous or '(empty)'}\n\nNew turns:\n{transcript}\n\n"
        f"Write the updated summary in at most {max_chars} characters."
    )
    return model.complete(system=SUMMARY_SYSTEM, prompt=prompt, timeout_s=timeout_s)


@dataclass(frozen=True)
class FoldReport:
    folded_messages: int
    kept_messages: int
    method: str  # "model" | "extractive"
    new_facts: int
    summary_chars: int
    usage: ModelDecision | None = None
    model_error: str = ""


def context_apply(
    *, state: AgentState, policy: ContextConfig, model: ModelAdapter | None, timeout_s: float
) -> FoldReport | None:
    """Fold old turns into the summary and hard facts when the policy says it is time. Call
    between steps (no tool call of the state may be pending). Returns what it did, or None."""
    if not needs_fold(state, policy):
        return None
    pinned = pinned_count(state.messages)
    cut = fold_cut(state.messages, pinned=pinned, window=policy.recent_history_window)
    folded = state.messages[pinned:cut]
    if not folded:
        return None
    before = set(state.hard_facts)
    if policy.hard_facts_keep:
        new = [fact for message in folded for fact in _message_facts(message)]
        state.hard_facts = merge_facts(state.hard_facts, new, limit=policy.hard_facts_max)
    method, usage, error = "extractive", None, ""
    summary = ""
    if policy.model_summary and model is not None and model.can_complete:
        try:
            usage = model_summary(
                model,
                previous=state.summary,
                messages=folded,
                max_chars=policy.summary_max_chars,
                timeout_s=timeout_s,
            )
            summary = usage.text.strip()[: policy.summary_max_chars]
            method = "model" if summary else method
        except ModelError as exc:
            error = str(exc)[:500]
    if method == "extractive":
        summary = extractive_summary(
            state.summary, digest(folded), max_chars=policy.summary_max_chars
        )
    state.summary = summary
    state.messages = state.messages[:pinned] + state.messages[cut:]
    state.folded_at_turn = state.turn_index
    return FoldReport(
        folded_messages=len(folded),
        kept_messages=len(state.messages),
        method=method,
        new_facts=len(set(state.hard_facts) - before),
        summary_chars=len(summary),
        usage=usage,
        model_error=error,
    )
