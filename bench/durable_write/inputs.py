"""What every side writes: chat text from a fixed corpus, the harness's AgentState and
LangChain's messages of a conversation so far."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

MESSAGES = 20


MESSAGE_CHARS = 500


# Real prose, which compresses about as chat does (~2x), unlike a small vocabulary of repeated
# words (4.4x): the project's documentation as it was at 0aba9ae, whitespace folded, frozen in
# bench/corpus.txt. Frozen, so that the text the benchmarks store is the same in every commit:
# read from the living docs, the README's growing benchmark table made a write step's stored
# bytes 24 % larger and compression slower with no code change.
_CORPUS = Path(__file__).resolve().parents[1] / "corpus.txt"


@functools.cache
def _corpus() -> str:
    return _CORPUS.read_text(encoding="utf-8")


def chat_text(seed: int, chars: int = MESSAGE_CHARS) -> str:
    """`chars` characters of the frozen corpus, from a place chosen by `seed`."""
    corpus = _corpus()
    start = (seed * 7919) % (len(corpus) - chars)
    return corpus[start : start + chars]


def agent_state() -> Any:
    """20 messages: system, user, then assistant tool calls and tool results in turn."""
    from tasks.agent_state import AgentState, Message, ProposedCall

    messages = [
        Message(role="system", content=chat_text(0)),
        Message(role="user", content=chat_text(1)),
    ]
    turn = 0
    while len(messages) < MESSAGES:
        call_id = f"0.{turn}.0"
        messages.append(
            Message(
                role="assistant",
                content=chat_text(2 + 2 * turn),
                calls=[
                    ProposedCall(
                        call_id=call_id, tool="read_file", args={"path": f"notes/{turn}.txt"}
                    )
                ],
            )
        )
        messages.append(
            Message(role="tool", content=chat_text(3 + 2 * turn), call_id=call_id, name="read_file")
        )
        turn += 1
    return AgentState(messages=messages[:MESSAGES], turn_index=turn, step_index=turn)


def langchain_messages(state: Any) -> list[Any]:
    """The same conversation as LangChain messages (what LangGraph's state would hold)."""
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    out: list[Any] = []
    for m in state.messages:
        if m.role == "system":
            out.append(SystemMessage(content=m.content))
        elif m.role == "user":
            out.append(HumanMessage(content=m.content))
        elif m.role == "assistant":
            out.append(
                AIMessage(
                    content=m.content,
                    tool_calls=[
                        {"name": c.tool, "args": c.args, "id": c.call_id} for c in m.calls or []
                    ],
                )
            )
        else:
            out.append(ToolMessage(content=m.content, tool_call_id=m.call_id, name=m.name))
    return out
