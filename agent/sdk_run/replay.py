"""A replay of a saved case run by an SDK runner (issue #47: Pydantic AI, OpenAI Agents
SDK): the case's recorded model decisions played back by the runner's replaying model, and its
tool calls matched with the recorded ones by the same oracle the harness's own loop uses
(agent.runtime.oracle), so that nothing runs live that the recording answers.

What a matched call does follows agent.runtime.replaying: a tool whose effect stays in the
replay's own workspace (declared risk `read` or `write`, or `metadata={"replay": "live"}`)
runs, and its answer is compared with the recorded one; any other tool is answered from the
recording without running. A call the recording does not answer, a policy that now refuses or
reviews it, or a live answer that differs from the recorded one is the divergence: a
`replay_diverged` event (with the two answers and their diff) and the replay stops there."""

from __future__ import annotations

import difflib
import json
from typing import Any

from agent.runtime.oracle import ToolOracle
from agent.runtime.replaying import recorded_brief
from agent.runtime.run import StopRun
from cases.selectors import ReplaySetup, replay_setup
from tasks.events import EventType
from tasks.models import Task, ToolCallStatus

# Declared risks of tools whose effect stays in the replay's own workspace: run live.
LIVE_RISKS = frozenset({"read", "write"})
_VALUE_CHARS = 1000
_DIFF_CHARS = 4000


def _json_lines(value: Any) -> list[str]:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str).split("\n")


def answer_diff(recorded: Any, now: Any) -> str:
    """The unified diff of two answers' JSON, recorded first (bounded)."""
    lines = difflib.unified_diff(
        _json_lines(recorded), _json_lines(now), "recorded", "now", lineterm=""
    )
    return "\n".join(lines)[:_DIFF_CHARS]


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False)
    return text if len(text) <= _VALUE_CHARS else text[:_VALUE_CHARS] + "…"


def outcome_of(status: str, result: Any, error_message: str) -> tuple[str, Any]:
    """A call's outcome as a replay compares it: (status, the value a success returned or
    the message a failure gave). A runner stores a value as {"value": ...} or {"output": ...}."""
    if status != ToolCallStatus.SUCCEEDED:
        return status, error_message
    for key in ("value", "output"):  # Pydantic AI's rows, the OpenAI Agents SDK's
        if isinstance(result, dict) and key in result:
            return status, result[key]
    return status, result


class SdkReplay:
    """The replay setup of an SDK task that replays a case: the recorded decisions, the tool
    oracle, and the divergence recorded as the loop's is."""

    def __init__(self, setup: ReplaySetup) -> None:
        self.case_name = setup.case_name
        self.decisions: dict[int, dict[str, Any]] = setup.decisions or {}
        self.oracle = ToolOracle.of(setup)

    @classmethod
    def of(cls, task: Task) -> SdkReplay | None:
        setup = replay_setup(task_id=task.id) if task.is_replay else None
        return cls(setup) if setup is not None else None

    @staticmethod
    def live(metadata: dict[str, Any] | None, default_risk: str) -> bool:
        """Whether a matched call runs (its effect stays in the replay's own workspace)."""
        metadata = metadata or {}
        if metadata.get("replay") == "live":
            return True
        return str(metadata.get("risk") or default_risk) in LIVE_RISKS

    def diverged(
        self, run: Any, *, call_id: str, tool: str, args: Any, reason: str, **more: Any
    ) -> StopRun:
        """The divergence on the timeline (written with the stop), and the stop to raise."""
        turn, step = self.position(run)
        run.event(
            EventType.REPLAY_DIVERGED,
            {
                "turn": turn,
                "step": step,
                "call_id": call_id,
                "tool": tool,
                "args": args,
                "reason": reason[:1000],
                "recorded": recorded_brief(self.oracle.current),
                "ran": "no",
                **more,
            },
        )
        return StopRun("replay_diverged", f"step {turn}: {reason[:1000]}")

    def position(self, run: Any) -> tuple[int, int]:
        """(turn, step) the run is at."""
        return run.state.turn_index, run.state.step_index

    def claim(
        self, run: Any, *, call_id: str, tool: str, args: Any, action: str, rules: list[Any]
    ) -> dict[str, Any]:
        """The recorded call answering this one, checked against what the policy decides now
        (`action`: allow, deny, review); raises the divergence otherwise."""
        recorded = self.oracle.claim(tool=tool, args=args)
        where = {"call_id": call_id, "tool": tool, "args": args}
        if recorded is None:
            reason = f"no recorded call of {tool} with these arguments"
            raise self.diverged(run, **where, reason=reason)
        if action == "deny" and recorded["status"] != ToolCallStatus.DENIED:
            reason = f"recorded {recorded['status']}; now refused (denied by policy)"
            raise self.diverged(run, **where, reason=reason)
        if action == "review" and not recorded.get("reviewed"):
            names = [str(r.get("name") or "") if isinstance(r, dict) else str(r) for r in rules]
            named = ", ".join(n for n in names if n) or "a review rule"
            reason = f"the policy now sends this call to review ({named}); recorded without"
            raise self.diverged(run, **where, reason=reason)
        return recorded

    def answer(self, run: Any, *, row: Any, recorded: dict[str, Any]) -> tuple[str, Any]:
        """The recorded outcome a call that does not run is given: (SUCCEEDED, its value) or
        (FAILED, the message). Any other outcome (denied, unknown...) cannot be given back:
        it is the divergence."""
        status, value = outcome_of(
            recorded["status"], recorded.get("result"), recorded.get("error_message") or ""
        )
        if status in (ToolCallStatus.SUCCEEDED, ToolCallStatus.FAILED):
            return status, value
        raise self.diverged(
            run,
            call_id=row.call_id,
            tool=row.tool,
            args=row.arguments,
            reason=f"the recording has no outcome a replay can give for this call ({status})",
        )

    def compare(self, run: Any, *, row: Any, recorded: dict[str, Any]) -> None:
        """A live call's outcome (its settled ledger row) against the recorded one: the
        divergence, with both answers and their diff, when they differ."""
        was = outcome_of(
            recorded["status"], recorded.get("result"), recorded.get("error_message") or ""
        )
        now = outcome_of(row.status, row.result, row.error_message)
        if was == now:
            return
        raise self.diverged(
            run,
            call_id=row.call_id,
            tool=row.tool,
            args=row.arguments,
            ran="yes",
            **self.changed(was, now),
        )

    @staticmethod
    def changed(was: tuple[str, Any], now: tuple[str, Any]) -> dict[str, Any]:
        """The divergence of a live call whose outcome `now` is not the recorded one `was`
        (each (status, answer)): its reason, and both answers with their diff."""
        if was[0] == now[0]:
            reason = f"the tool's answer changed: recorded {_short(was[1])}, now {_short(now[1])}"
        else:
            reason = f"recorded {was[0]} ({_short(was[1])}); now {now[0]} ({_short(now[1])})"
        return {
            "reason": reason,
            "answer": {
                "recorded": _short(was[1]),
                "now": _short(now[1]),
                "diff": answer_diff(
                    {"status": was[0], "answer": was[1]}, {"status": now[0], "answer": now[1]}
                ),
            },
        }
