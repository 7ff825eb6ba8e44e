"""The run's beginning (RunStart, part of AgentsRun): a new task's workspace files and
task_start checkpoint, or the head checkpoint resumed (verified; the workspace brought in
line, a recovery's branch taken, the ledger loaded); the SDK's first input."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from agent.openai_agents_runner.reviews import ReviewPauses
from agent.openai_agents_runner.values import KIND
from agent.sdk_run.alignment import sdk_alignment
from agent.sdk_run.hosted import hosted_permission
from tasks.events import EventType
from tasks.models import ToolCall


class RunStart(ReviewPauses):
    """AgentsRun's start: start, first_input."""

    def start(self) -> None:
        """A new task: its workspace files and the task_start checkpoint. Otherwise resume the
        head checkpoint (SdkRun.pick_up): a recovery's branch taken, the ledger loaded."""
        loaded = self.pick_up({"kind": KIND, "agent": self.agent_spec.name, "run_state": None})
        if loaded is None:
            self.commit(checkpoint=("task_start", "task"))
            return
        recovery = self.state.recovery
        if recovery is not None and recovery.kind == "rollback":
            # The calls after the checkpoint were undone: the SDK's pending calls run again
            # under new call ids (the rollback's branch).
            self.state.sdk = {**(self.state.sdk or {}), "branch": self.state.branch}
        if recovery is not None:
            aligned = sdk_alignment(task_id=self.task_id, state=self.state, loaded=loaded)
            summary, text = aligned if aligned else ({}, "")
            # Told the agent as the native loop tells it, at the point of the history where
            # it resumes (agent.openai_agents_runner.harness_model: `aligned`).
            self.state.sdk = {
                **(self.state.sdk or {}),
                "alignments": [*self.alignments(), {"text": text, "at": None}],
            }
            self.event(
                EventType.CONTEXT_ALIGNED,
                {
                    **summary,
                    "kind": recovery.kind,
                    "reason": recovery.reason,
                    "undone": recovery.undone,
                },
            )
            self.state.recovery = None
            self.state.last_error = None
        # Every branch's calls: a recorded turn's calls that ran before a rollback replay from
        # the branch they ran on (turns.RecordedTurns).
        self.ledger = {
            row.call_id: row
            for row in ToolCall.objects.filter(task_id=self.task_id, call_id__startswith="oa")
        }
        self.resumed(loaded)

    def calls_pending(self) -> Iterable[ToolCall]:
        """This branch's calls (the gate runs those approved or allowed and not run yet); a
        model turn's permission to use a hosted tool is no call."""
        branch = f"oa{self.sdk_branch()}:"
        return [
            row
            for row in self.ledger.values()
            if row.call_id.startswith(branch) and not hosted_permission(row)
        ]

    def first_input(self) -> Any:
        given = self.agent_spec.input
        return given if given else self.spec.goal
