"""A replay's tool calls (issue #31): answered from the case's recording by the oracle
(agent.runtime.oracle), checked against it where the current code, tools schema or policy
decide otherwise, and stopped at the first call the recording does not answer — unless the
replay asked to run such calls in the sandbox, and the call is one that can run there.

Never a live side effect by default: a matched call's result is the recorded one (a workspace
tool's effect, and a command's recorded file effect, are re-applied to the replay's own
workspace only), and a divergent call does not
run. The divergence is a `replay_diverged` event the report highlights."""

from __future__ import annotations

import base64
from typing import Any, Literal, NoReturn, overload

from agent.runtime.attempt import ToolOutcome, invoke, observation
from agent.runtime.oracle import WORKSPACE_TOOLS
from agent.runtime.run import Run, StopRun
from tasks.agent_state import ProposedCall
from tasks.errors import PermanentToolError
from tasks.events import EventType
from tasks.models import ToolCallStatus
from tasks.paths import file_delete, file_write, workspace_dir
from tasks.tools.registry import ToolContext, ToolSpec

# A recorded outcome as the attempt of a replayed call ends (the ledger's transitions from
# running): a reviewer's rejection stands as a failure of that class.
_ANSWERABLE = {
    ToolCallStatus.SUCCEEDED: ToolCallStatus.SUCCEEDED,
    ToolCallStatus.FAILED: ToolCallStatus.FAILED,
    ToolCallStatus.TIMED_OUT: ToolCallStatus.TIMED_OUT,
    ToolCallStatus.REJECTED: ToolCallStatus.FAILED,
    ToolCallStatus.DENIED: ToolCallStatus.FAILED,
}


def recorded_brief(recorded: dict[str, Any] | None) -> dict[str, Any] | None:
    if recorded is None:
        return None
    return {
        k: recorded.get(k) for k in ("turn", "tool", "args", "status", "error_class", "reviewed")
    }


@overload
def replay_diverged(
    run: Run, call: ProposedCall, *, reason: str, stop: Literal[True] = True
) -> NoReturn: ...


@overload
def replay_diverged(run: Run, call: ProposedCall, *, reason: str, stop: bool) -> None: ...


def replay_diverged(run: Run, call: ProposedCall, *, reason: str, stop: bool = True) -> None:
    """Record the divergence; stop the replay there (default) or go on (a call the replay
    runs in the sandbox)."""
    run.event(
        EventType.REPLAY_DIVERGED,
        {
            "turn": run.state.turn_index,
            "step": run.state.step_index,
            "call_id": call.call_id,
            "tool": call.tool,
            "args": call.args,
            "reason": reason[:1000],
            "recorded": recorded_brief(run.oracle.current if run.oracle else None),
            "ran": "no" if stop else "sandbox",
        },
    )
    if stop:
        raise StopRun("replay_diverged", f"step {run.state.turn_index}: {reason[:1000]}")
    return None


def replay_claim(run: Run, call: ProposedCall) -> None:
    """Before a call is checked: the recorded call answering it, or the divergence."""
    oracle = run.oracle
    assert oracle is not None
    if oracle.claim(tool=call.tool, args=call.args) is not None:
        return
    live = oracle.may_run_live(tool=call.tool, args=call.args)
    replay_diverged(
        run,
        call,
        reason=f"no recorded call of {call.tool} with these arguments",
        stop=not live,
    )


def replay_refused(run: Run, call: ProposedCall, *, status: str, error_class: str, what: str):
    """A call refused before it ran (unknown tool, arguments the schema now rejects, a check,
    the policy's deny): a divergence unless the recording refused it the same way."""
    recorded = run.oracle.current if run.oracle else None
    if recorded is None:
        return
    if (recorded["status"], recorded["error_class"]) == (status, error_class):
        return
    replay_diverged(
        run,
        call,
        reason=(
            f"recorded {recorded['status']}"
            f"{' (' + recorded['error_class'] + ')' if recorded['error_class'] else ''}; "
            f"now refused ({error_class}: {what})"
        ),
    )


def replay_review(run: Run, call: ProposedCall, *, rules: list[str]) -> None:
    """The policy sends the call to review. A replay never waits for a person: the recorded
    decision stands if the recording was reviewed too; otherwise this is the divergence."""
    recorded = run.oracle.current if run.oracle else None
    if recorded is not None and recorded.get("reviewed"):
        return
    named = ", ".join(rules) or "a review rule"
    replay_diverged(
        run, call, reason=f"the policy now sends this call to review ({named}); recorded without"
    )


def _effects_apply(run: Run, ctx: ToolContext, recorded: dict[str, Any]) -> None:
    """A matched command's recorded file effect (cases.effects), re-applied to the replay's own
    workspace through the same no-symlink, inside-the-workspace writes the file tools use. One
    that cannot be applied (a path the workspace now refuses) is the divergence."""
    effects = recorded["effects"]
    try:
        for folder in effects.get("folders", []):
            with workspace_dir(ctx.workspace, folder, create=True):
                pass
        for path, written in effects.get("write", {}).items():
            data = base64.b64decode(written["b64"], validate=True)
            file_write(ctx.workspace, path, data, mode=int(written.get("mode", 0o644)) & 0o777)
        for path in effects.get("delete", []):
            file_delete(ctx.workspace, path)
    except (OSError, ValueError, PermanentToolError) as exc:
        call = ProposedCall(call_id=ctx.call_id, tool=recorded["tool"], args=recorded["args"])
        replay_diverged(run, call, reason=f"the command's recorded file effect: {exc}")
    finally:
        # The files changed without a tool reporting which: the next checkpoint looks at all.
        run.snapshot = None


def replay_answer(run: Run, tool: ToolSpec, ctx: ToolContext, args: Any) -> ToolOutcome:
    """A matched call's outcome: the recorded one, without running the tool. A workspace tool's
    effect is re-applied to the replay's own workspace (its own result is not used)."""
    recorded = run.oracle.current if run.oracle else None
    assert recorded is not None
    status = _ANSWERABLE.get(recorded["status"])
    if status is None:
        call = ProposedCall(call_id=ctx.call_id, tool=tool.name, args=recorded["args"])
        replay_diverged(
            run, call, reason=f"the recording has no outcome for this call ({recorded['status']})"
        )
    if tool.name in WORKSPACE_TOOLS and recorded["status"] == ToolCallStatus.SUCCEEDED:
        invoke(run, tool, ctx, args)
    if recorded.get("effects") and recorded["status"] == ToolCallStatus.SUCCEEDED:
        _effects_apply(run, ctx, recorded)
    if recorded["status"] == ToolCallStatus.SUCCEEDED:
        result = recorded.get("result")
        return ToolOutcome(
            status=recorded["status"], observation=observation(result), result=result
        )
    return ToolOutcome(
        status=status,
        observation=recorded.get("observation") or recorded.get("error_message") or "",
        error_class=recorded.get("error_class") or recorded["status"],
        error_message=recorded.get("error_message") or "",
    )
