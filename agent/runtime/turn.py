"""One model turn: the model decides (bounded by the turn timeout), its usage is charged, a
final answer meets the TaskSpec's checks, and the decision is staged with the `after_model`
checkpoint for the step's next durable write (before its first tool runs). A model error is
retried through the scheduler or ends the run."""

from __future__ import annotations

import dataclasses
import time
from typing import Any, NoReturn

from agent.context import HARNESS_AUTHOR
from agent.llm import ModelDecision, ModelError
from agent.retry import TIMEOUT, is_retryable, retry_policy
from agent.runtime.run import OBSERVATION_MAX_CHARS, Run, StopRun
from agent.runtime.step import step_finish
from agent.runtime.watchdog import InThread
from agent.tracing import chat_span
from agent.validation import CheckFailure, check_final
from tasks import beacon
from tasks.agent_state import ErrorInfo, Message, ProposedCall
from tasks.canonical import nul_free
from tasks.events import EventType
from tasks.tools.registry import ToolSpec, UnknownTool


def model_turn(run: Run) -> None:
    started = time.monotonic()
    error: ModelError | None = None
    model = getattr(run.spec.model, "model", None) or run.model.name
    with chat_span(provider=run.model.name, model=model, state=run.state) as chat:
        try:
            decision = _decide(run)
        except ModelError as exc:
            chat.failed(exc.error_class, str(exc))
            error = exc
        else:
            usage = run.charge(decision)
            chat.decided(decision, usage)
    if error is not None:
        _on_model_error(run, error)
    duration_ms = (time.monotonic() - started) * 1000
    state = run.state
    state.model_retries = 0
    calls = [
        ProposedCall(call_id=state.new_call_id(i), tool=c.tool, args=c.args, raw_error=c.raw_error)
        for i, c in enumerate(decision.calls)
    ]
    state.messages.append(
        Message(
            role="assistant", content=decision.text[:OBSERVATION_MAX_CHARS], calls=calls or None
        )
    )
    state.turn_index += 1
    state.last_error = None
    # The final answer: the model's, unless it also proposed calls.
    final = decision.final if not calls else None
    run.event(
        EventType.MODEL_DECISION,
        {
            "turn": state.turn_index,
            **usage,
            "calls": [
                {
                    "call_id": c.call_id,
                    "tool": c.tool,
                    "args": c.args,
                    **({"raw_error": c.raw_error} if c.raw_error else {}),
                }
                for c in calls
            ],
            "final": decision.final,
            "text": decision.text[:2000],
            "duration_ms": round(duration_ms, 3),
        },
    )
    failure = _check_final_answer(run, final) if final is not None else None
    if failure is not None:
        # The model tries again: the feedback is the next step's input.
        state.messages.append(Message(role="user", name=HARNESS_AUTHOR, content=failure.feedback))
        run.note_check_failure(failure.what)
    elif final is not None:
        state.final = final
        state.phase = "done"
    else:
        state.pending = calls
        state.next_call = 0
        state.phase = "tools"
    # Written with the step's next write: before its first tool runs, or at its end.
    run.stage(trigger="after_model")
    run.turn_unwritten = True
    if failure is not None:
        step_finish(run)


def _allowed_tools(run: Run) -> list[ToolSpec]:
    """The task's tools, their documentation capped by the context policy."""
    cap = run.context.tool_doc_max_chars
    out = []
    for name in run.tool_names():
        try:
            tool = run.tool(name)
        except UnknownTool:
            continue
        if len(tool.description) > cap:
            tool = dataclasses.replace(tool, description=tool.description[: cap - 1] + "…")
        out.append(tool)
    return out


def _decide(run: Run) -> ModelDecision:
    """The model call, bounded by the turn timeout even if the adapter ignores it."""
    tools = _allowed_tools(run)
    call = InThread(
        lambda: run.model.decide(state=run.state, tools=tools, timeout_s=run.turn_s),
        name=f"model-{run.task_id}",
        layer="turn",
        timeout_s=run.turn_s,
    )
    if not call.wait():
        run.timeout_event(layer="turn", limit_s=run.turn_s)
        raise ModelError(
            f"the model call exceeded the {run.turn_s:g}s turn timeout (layer: turn)",
            error_class=TIMEOUT,
        )
    if call.error is not None:
        raise call.error
    decision = call.value
    return dataclasses.replace(
        decision,
        text=nul_free(decision.text),
        final=nul_free(decision.final),
        calls=[
            dataclasses.replace(c, tool=nul_free(c.tool), args=nul_free(c.args))
            for c in decision.calls
        ],
    )


def _check_final_answer(run: Run, final: str) -> CheckFailure | None:
    """The TaskSpec's deep checks on a final answer (agent/validation.py)."""
    if run.spec.checks is None:
        return None
    beacon.expect("turn", run.turn_s)  # a judge model may be asked
    verdict = check_final(
        final=final,
        checks=run.spec.checks,
        workspace=run.workspace,
        task_id=run.task_id,
        goal=run.spec.goal,
        model=run.model,
        timeout_s=run.turn_s,
    )
    beacon.progress()
    payload: dict[str, Any] = {"passed": verdict.failure is None}
    if verdict.review is not None:
        payload.update(run.charge(verdict.review), reviewed=True)
    if verdict.review_skipped:
        payload["review_skipped"] = verdict.review_skipped[:500]
    if verdict.failure is not None:
        payload["feedback"] = verdict.failure.feedback
    run.event(EventType.FINAL_CHECKED, payload)
    return verdict.failure


def _on_model_error(run: Run, exc: ModelError) -> NoReturn:
    """Transient errors (and turn timeouts) are retried with backoff; the task fails once
    the attempts are used up, or at once for a permanent error."""
    attempt = run.state.model_retries + 1
    run.event(
        EventType.MODEL_ERROR,
        {
            "error_class": exc.error_class,
            "message": str(exc)[:2000],
            "status": exc.status,
            "attempt": attempt,
        },
    )
    policy = retry_policy(config=run.config, task_override=run.spec.retry)
    if is_retryable(exc.error_class, idempotent=True) and attempt < policy.max_attempts:
        run.state.model_retries = attempt
        run.schedule_retry(
            attempt=attempt,
            delay_s=policy.delay_s(attempt, retry_after_s=exc.retry_after_s),
            error=ErrorInfo(
                error_class=exc.error_class,
                message=str(exc)[:2000],
                step_index=run.state.step_index,
            ),
        )
    error_class = "model_error" if exc.error_class == "permanent" else exc.error_class
    raise StopRun(error_class, f"model call failed (attempt {attempt}): {exc}")
