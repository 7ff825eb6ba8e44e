"""An agent's history as the harness's messages, for the pages that show what the model had
seen (a review's "recent messages"): `sdk_messages`, a Pydantic AI agent's message list
(ModelMessagesTypeAdapter JSON) and an OpenAI Agents SDK agent's RunState (its input and
generated items), read from the stored JSON alone, without the SDKs; `graph_messages`, the
`messages` channel of a LangGraph graph's checkpoint (LangChain's messages). A part of a kind
this does not know is left out, never an error."""

from __future__ import annotations

import json
from typing import Any

from tasks.agent_state import Message, ProposedCall

PYDANTIC_AI = "pydantic-ai"
OPENAI_AGENTS = "openai-agents"


def sdk_messages(sdk: Any) -> list[Message]:
    """The messages of an SDK's state (`AgentState.sdk`, its history whole again), oldest
    first; [] for a state of no known SDK."""
    if not isinstance(sdk, dict):
        return []
    if sdk.get("kind") == PYDANTIC_AI:
        return _pydantic_ai(sdk.get("messages"))
    if sdk.get("kind") == OPENAI_AGENTS:
        state = sdk.get("run_state")
        if isinstance(state, str):
            try:
                state = json.loads(state)
            except ValueError:
                return []
        if isinstance(state, dict):
            return _openai_agents(state)
        # Between pauses the adapter keeps only the model's responses (`turns`; the calls'
        # outputs are on the ledger): what the model said and asked for.
        return [m for turn in sdk.get("turns") or [] for m in _openai_turn(turn)]
    return []


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def _args(value: Any) -> dict[str, Any]:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return {"arguments": value}
    return value if isinstance(value, dict) else {"arguments": value}


def _pydantic_ai(messages: Any) -> list[Message]:
    out: list[Message] = []
    for message in messages if isinstance(messages, list) else []:
        if not isinstance(message, dict):
            continue
        parts = [p for p in message.get("parts") or [] if isinstance(p, dict)]
        if message.get("kind") == "response":
            text = "".join(_text(p.get("content")) for p in parts if p.get("part_kind") == "text")
            calls = [
                ProposedCall(
                    call_id=str(p.get("tool_call_id") or ""),
                    tool=str(p.get("tool_name") or ""),
                    args=_args(p.get("args")),
                )
                for p in parts
                if p.get("part_kind") == "tool-call"
            ]
            if text or calls:
                out.append(Message(role="assistant", content=text, calls=calls or None))
            continue
        for part in parts:
            kind = part.get("part_kind")
            if kind == "user-prompt":
                out.append(Message(role="user", content=_text(part.get("content"))))
            elif kind in ("tool-return", "retry-prompt"):
                out.append(
                    Message(
                        role="tool",
                        content=_text(part.get("content")),
                        call_id=str(part.get("tool_call_id") or "") or None,
                        name=str(part.get("tool_name") or "") or None,
                    )
                )
    return out


def _openai_agents(state: dict[str, Any]) -> list[Message]:
    out: list[Message] = []
    first = state.get("original_input")
    if isinstance(first, str):
        out.append(Message(role="user", content=first))
    for item in first if isinstance(first, list) else []:
        if isinstance(item, dict) and item.get("role") in ("user", "assistant"):
            out.append(Message(role=item["role"], content=_content_text(item.get("content"))))
    for item in state.get("generated_items") or []:
        if not isinstance(item, dict):
            continue
        raw_item = item.get("raw_item")
        raw: dict[str, Any] = raw_item if isinstance(raw_item, dict) else {}
        kind = item.get("type")
        if kind in ("message_output_item", "tool_call_item"):
            out += _openai_output(raw)
        elif kind == "tool_call_output_item":
            out.append(
                Message(
                    role="tool",
                    content=_text(item.get("output", raw.get("output"))),
                    call_id=str(raw.get("call_id") or "") or None,
                )
            )
    return out


def _openai_turn(turn: Any) -> list[Message]:
    response = turn.get("response") if isinstance(turn, dict) else None
    items = response.get("output") if isinstance(response, dict) else None
    raws = items if isinstance(items, list) else []
    return [m for raw in raws if isinstance(raw, dict) for m in _openai_output(raw)]


def _openai_output(raw: dict[str, Any]) -> list[Message]:
    """A model output item (a RunState item's `raw_item`, or a response's `output`): its text,
    or the function it calls."""
    if raw.get("type") == "message":
        return [Message(role="assistant", content=_content_text(raw.get("content")))]
    if raw.get("type") == "function_call":
        call = ProposedCall(
            call_id=str(raw.get("call_id") or ""),
            tool=str(raw.get("name") or ""),
            args=_args(raw.get("arguments")),
        )
        return [Message(role="assistant", calls=[call])]
    return []


def _content_text(content: Any) -> str:
    """A message's text: a string, or the text of its parts (output_text, input_text)."""
    if isinstance(content, str):
        return content
    parts = content if isinstance(content, list) else []
    return "".join(str(part.get("text") or "") for part in parts if isinstance(part, dict))


def graph_messages(*, task_id: Any, checkpoint_id: str) -> list[Message]:
    """The `messages` channel of one of the task's LangGraph checkpoints (a MessagesState
    graph's conversation, as LangChain's messages), oldest first; [] for a graph without one
    or a checkpoint gone."""
    # Imported here: LangGraph takes seconds to import, and only a graph's review needs it.
    from checkpoints.langgraph import DjangoCheckpointSaver

    saver = DjangoCheckpointSaver(task_id=task_id)
    try:
        loaded = saver.get_tuple(
            {
                "configurable": {
                    "thread_id": str(task_id),
                    "checkpoint_ns": "",
                    "checkpoint_id": checkpoint_id,
                }
            }
        )
    finally:
        saver.close()
    values = loaded.checkpoint.get("channel_values") or {} if loaded is not None else {}
    messages = values.get("messages") if isinstance(values, dict) else None
    return [m for m in (_langchain(message) for message in messages or []) if m is not None]


_LANGCHAIN_ROLES = {"human": "user", "ai": "assistant", "tool": "tool", "system": "system"}


def _langchain(message: Any) -> Message | None:
    role = _LANGCHAIN_ROLES.get(str(getattr(message, "type", "")))
    if role is None:
        return None
    calls = [
        ProposedCall(
            call_id=str(call.get("id") or ""),
            tool=str(call.get("name") or ""),
            args=_args(call.get("args")),
        )
        for call in getattr(message, "tool_calls", None) or []
        if isinstance(call, dict)
    ]
    content = getattr(message, "content", "")
    return Message(
        role=role,  # type: ignore[arg-type]  # one of Message's roles, by _LANGCHAIN_ROLES
        content=_content_text(content) if isinstance(content, list) else _text(content),
        calls=calls or None,
        call_id=getattr(message, "tool_call_id", None),
        name=getattr(message, "name", None) if role == "tool" else None,
    )
