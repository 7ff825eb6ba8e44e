"""The context policy: bounded AgentState, rolling summary, hard facts, whole turns only."""

from __future__ import annotations

import pytest

from agent.context import context_apply, extract_facts
from checkpoints.models import Checkpoint
from checkpoints.services import checkpoint_load_latest_valid
from harness_base.config import ContextConfig
from tasks.agent_state import AgentState, Message, ProposedCall
from tests.llm.support import create, event_payloads, run

FACT_LINE = "Invoice INV-2031 totals $4,250.00 and is due 2024-07-15."
CONSTRAINT = "Never pay more than $5,000 without approval."


def _turn(n: int, calls: int) -> list[Message]:
    proposed = [ProposedCall(call_id=f"0.{n}.{i}", tool="noop") for i in range(calls)]
    return [Message(role="assistant", content="", calls=proposed)] + [
        Message(role="tool", content='{"ok": true}', call_id=c.call_id, name="noop")
        for c in proposed
    ]


def _state(turn_sizes: list[int]) -> AgentState:
    messages = [Message(role="system", content="sys"), Message(role="user", content="goal")]
    for n, calls in enumerate(turn_sizes):
        messages += _turn(n, calls)
    return AgentState(messages=messages, turn_index=len(turn_sizes))


def _assert_whole_turns(state: AgentState) -> None:
    """Every tool result follows the assistant message that made its call."""
    open_calls: set[str] = set()
    for message in state.messages:
        if message.role == "assistant":
            open_calls = {c.call_id for c in message.calls or []}
        elif message.role == "tool":
            assert message.call_id in open_calls, f"orphan tool result {message.call_id}"
            open_calls.discard(message.call_id)
    assert not open_calls


def test_folding_never_separates_a_call_from_its_results():
    state = _state([3, 1, 4, 2, 3])  # the window edge falls inside the last, three-call turn
    policy = ContextConfig(recent_history_window=3, summary_interval=1)
    report = context_apply(state=state, policy=policy, model=None, timeout_s=1)

    assert report is not None and report.method == "extractive"
    _assert_whole_turns(state)
    assert [m.role for m in state.messages[:2]] == ["system", "user"]
    # The window was widened back to the start of the turn rather than cut through it.
    assert state.messages[2].role == "assistant" and len(state.messages) - 2 == 4
    assert "[0.0.0] noop({})" in state.summary


def test_nothing_folds_before_the_interval_unless_history_doubles_the_window():
    policy = ContextConfig(recent_history_window=4, summary_interval=8)
    state = _state([1, 1, 1])
    assert context_apply(state=state, policy=policy, model=None, timeout_s=1) is None
    state = _state([1] * 5)  # 10 messages > 2 * window
    assert context_apply(state=state, policy=policy, model=None, timeout_s=1) is not None


def test_hard_facts_are_amounts_dates_ids_and_user_constraints_verbatim():
    text = (
        f"Done. {FACT_LINE} The weather was fine.\nOrder #4521 ships on March 3, 2025. "
        f"Ticket 5b0e8a3c-2f1d-4e0a-9c1b-7d2e3f4a5b6c is closed. {CONSTRAINT}"
    )
    facts = extract_facts(text, constraints=True)
    assert FACT_LINE in facts
    assert "Order #4521 ships on March 3, 2025." in facts
    assert "Ticket 5b0e8a3c-2f1d-4e0a-9c1b-7d2e3f4a5b6c is closed." in facts
    assert f"constraint: {CONSTRAINT}" in facts
    assert not any("weather" in f or f == "Done." for f in facts)
    assert extract_facts('{"ok": true, "size": 12, "files": []}', constraints=False) == []


db = pytest.mark.django_db(transaction=True)


def _head_state(task) -> AgentState:
    return checkpoint_load_latest_valid(task_id=task.id, head_id=task.head_checkpoint_id).state


@db
def test_a_500_turn_task_keeps_its_state_bounded_and_its_hard_facts():
    script = (
        [{"call": "read_file", "args": {"path": "invoice.txt"}}]
        + [{"call": "list_files", "args": {}}] * 498
        + [{"final": "paid"}]
    )
    task = run(
        create(
            {"kind": "scripted", "script": script},
            ["read_file", "list_files"],
            goal=f"Pay the invoice in invoice.txt. {CONSTRAINT}",
            workspace={"files": {"invoice.txt": f"{FACT_LINE}\n"}},
            budget={"max_steps": 1000},
        )
    )

    assert task.status == "succeeded", task.error_message
    sizes = list(
        Checkpoint.objects.filter(task=task).order_by("seq").values_list("size_bytes", flat=True)
    )
    assert len(sizes) >= 1000
    assert max(sizes) < 16_000
    # Flat, not growing: the last hundred checkpoints are no larger than those at turn ~100.
    assert max(sizes[-200:]) <= max(sizes[150:400]) * 1.1

    state = _head_state(task)
    assert state.turn_index == 500
    assert len(state.messages) <= 2 + 20 + 2 * 8 + 1
    assert not any("INV-2031" in m.content for m in state.messages[2:])  # folded long ago
    assert FACT_LINE in state.hard_facts
    assert f"constraint: {CONSTRAINT}" in state.hard_facts
    assert len(state.summary) <= ContextConfig().summary_max_chars
    folds = event_payloads(task, "context_folded")
    assert folds and all(f["method"] == "extractive" for f in folds)


@db
def test_the_model_writes_the_summary_when_it_can(chat_server):
    chat_server.tool_calls(("read_file", {"path": "invoice.txt"}))
    chat_server.tool_calls(("list_files", {}))
    chat_server.answer(
        "Read invoice.txt (INV-2031, $4,250.00); listed files.",
        prompt_tokens=300,
        completion_tokens=30,
    )
    chat_server.answer("paid")
    task = run(
        create(
            {"kind": "openai"},
            ["read_file", "list_files"],
            workspace={"files": {"invoice.txt": FACT_LINE}},
            context={"recent_history_window": 2, "summary_interval": 2},
        )
    )

    assert task.status == "succeeded", task.error_message
    summary_request = chat_server.requests[2].body
    assert "tools" not in summary_request
    assert "INV-2031" in summary_request["messages"][1]["content"]
    (fold,) = event_payloads(task, "context_folded")
    assert (fold["method"], fold["prompt_tokens"], fold["completion_tokens"]) == ("model", 300, 30)
    # The last turn saw the summary and the facts in its system message, not the old turn.
    final_request = chat_server.requests[3].body["messages"]
    assert "Read invoice.txt (INV-2031, $4,250.00); listed files." in final_request[0]["content"]
    assert f"- {FACT_LINE}" in final_request[0]["content"]
    assert not any(m.get("tool_call_id") == "0.0.0" for m in final_request)
    assert task.tokens_used == 3 * 120 + 330


@db
def test_a_failed_summary_call_falls_back_to_the_extractive_summary(chat_server):
    chat_server.tool_calls(("list_files", {}))
    chat_server.tool_calls(("list_files", {}))
    chat_server.error(503, "The engine is currently overloaded")
    chat_server.answer("done")
    task = run(
        create(
            {"kind": "openai"},
            ["list_files"],
            context={"recent_history_window": 2, "summary_interval": 2},
        )
    )

    assert task.status == "succeeded", task.error_message
    (fold,) = event_payloads(task, "context_folded")
    assert fold["method"] == "extractive" and "overloaded" in fold["model_error"]
    assert "[0.0.0] list_files({})" in _head_state(task).summary
