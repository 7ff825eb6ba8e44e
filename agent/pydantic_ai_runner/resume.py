"""Starting or resuming a run segment (RunStart, part of PydanticAIRun): from the head
checkpoint (verified; a fallback to an older one is recorded), the workspace materialised,
a recovery (rollback, retry) aligned, the reviewers' decisions read; a task with no
checkpoint yet starts from its spec's input."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any, NoReturn

from pydantic_ai import DeferredToolResults
from pydantic_ai.messages import ModelRequest, UserPromptPart

from agent.pydantic_ai_runner.constants import KIND
from agent.pydantic_ai_runner.decisions import RunDecisions
from agent.pydantic_ai_runner.messages import messages_dump, messages_load
from agent.runtime.run_writes import LEDGER_FIELDS
from agent.sdk_run.alignment import sdk_alignment
from checkpoints.services import LoadedCheckpoint
from tasks.events import EventType
from tasks.models import ToolCall


class RunStart(RunDecisions):
    """Where a run segment starts: the first prompt or the message history and decisions."""

    def start_or_resume(self) -> tuple[Any, DeferredToolResults | None]:
        """-> (the first user prompt or None, the reviewers' decisions or None)."""
        loaded = self.pick_up({"kind": KIND, "gen": 0, "messages": [], "deferred": []})
        if loaded is None:
            self.commit(trigger="task_start")
            return self.first_prompt(), None
        self.ledger = {row.call_id: row for row in ToolCall.objects.filter(task_id=self.task_id)}
        recovery = self.state.recovery
        if recovery is not None:
            if recovery.kind == "rollback":
                # Calls on the new branch get new ids: nothing of the undone branch replays.
                self.sdk["gen"] = self.state.branch
            self.rerun_failed = recovery.kind == "retry"
            summary = self.align(loaded)
            self.event(
                EventType.CONTEXT_ALIGNED,
                {
                    **summary,
                    "kind": recovery.kind,
                    "reason": recovery.reason,
                    "actor": recovery.actor,
                    "from_seq": recovery.from_seq,
                    "messages": len(self.sdk["messages"]),
                },
            )
            self.state.recovery = None
        self.resumed(loaded, messages=len(self.sdk["messages"]))
        results = self.decisions() if self.sdk.get("deferred") else None
        if not self.sdk["messages"]:  # stopped before the first model turn
            return self.first_prompt(), None
        return None, results

    def align(self, loaded: LoadedCheckpoint) -> dict[str, Any]:
        """What the recovery undid, told the agent as the native loop tells it
        (agent.sdk_run.alignment): a user prompt added to the history's last request, so the
        next model request holds it. -> the summary."""
        aligned = sdk_alignment(task_id=self.task_id, state=self.state, loaded=loaded)
        if aligned is None:
            return {}
        summary, text = aligned
        messages = messages_load(self.sdk["messages"])
        last = next((m for m in reversed(messages) if isinstance(m, ModelRequest)), None)
        if last is not None:
            last.parts = [*last.parts, UserPromptPart(text)]
            self.sdk["messages"] = messages_dump(messages)
        return summary

    def calls_pending(self) -> Iterable[ToolCall]:
        """The approvals asked for: their calls are what runs next (an external call's tool
        never runs: its answer is its result)."""
        deferred = [d["call_id"] for d in self.sdk.get("deferred") or [] if not d.get("external")]
        return [self.ledger[call_id] for call_id in deferred if call_id in self.ledger]

    def pause_written(
        self, reason: str, rows: list[ToolCall], then: Callable[[Any], None]
    ) -> NoReturn:
        self.pause(
            reason=reason,
            trigger="before_review",
            inserts=[row for row in rows if row.pk is None],
            updates=[(row, LEDGER_FIELDS) for row in rows if row.pk is not None],
            then=lambda written: then(written.id if written else None),
        )

    def first_prompt(self) -> str:
        """The spec's input (JSON as its text); empty: the task's goal."""
        prompt = self.agent_spec.input
        if prompt == "":
            return self.spec.goal
        return prompt if isinstance(prompt, str) else json.dumps(prompt)
