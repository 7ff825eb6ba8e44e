"""Starting or resuming a run segment (RunStart, part of PydanticAIRun): from the head
checkpoint (verified; a fallback to an older one is recorded), the workspace materialised,
a recovery (rollback, retry) aligned, the reviewers' decisions read; a task with no
checkpoint yet starts from its spec's input."""

from __future__ import annotations

import json
from typing import Any

from pydantic_ai import DeferredToolResults

from agent.pydantic_ai_runner.constants import KIND
from agent.pydantic_ai_runner.decisions import RunDecisions
from agent.runtime.run import StopRun
from agent.sdk_drift import sdk_drift_at_pickup
from checkpoints.services import NoValidCheckpoint, checkpoint_load_latest_valid
from checkpoints.snapshots import snapshot_materialise_if_missing
from tasks.agent_state import AgentState
from tasks.events import EventType
from tasks.models import ToolCall
from tasks.paths import file_write


class RunStart(RunDecisions):
    """Where a run segment starts: the first prompt or the message history and decisions."""

    def start_or_resume(self) -> tuple[Any, DeferredToolResults | None]:
        """-> (the first user prompt or None, the reviewers' decisions or None)."""
        try:
            loaded = checkpoint_load_latest_valid(
                task_id=self.task_id, head_id=self.head_id, epoch=self.epoch
            )
        except NoValidCheckpoint as exc:
            raise StopRun("checkpoint_corrupted", str(exc)) from None
        self.workspace.mkdir(parents=True, exist_ok=True)
        if loaded is None:
            for rel, content in self.spec.workspace.files.items():
                file_write(self.workspace, rel, content.encode())
            self.state = AgentState(sdk={"kind": KIND, "gen": 0, "messages": [], "deferred": []})
            self.event(EventType.TASK_STARTED, {"worker": self.worker_id, "epoch": self.epoch})
            self.commit(trigger="task_start")
            return self.first_prompt(), None
        self.state = loaded.state
        if self.state.sdk is None or self.state.sdk.get("kind") != KIND:
            raise StopRun("checkpoint_corrupted", "the head checkpoint holds no Pydantic AI state")
        if loaded.checkpoint.id != self.head_id:
            self.event(
                EventType.CHECKPOINT_FALLBACK,
                {"checkpoint_id": str(loaded.checkpoint.id), "seq": loaded.checkpoint.seq},
            )
            self.head_id = loaded.checkpoint.id
        self.ledger = {row.call_id: row for row in ToolCall.objects.filter(task_id=self.task_id)}
        recovery = self.state.recovery
        if snapshot_materialise_if_missing(
            workspace=self.workspace, manifest=loaded.snapshot, sync=recovery is not None
        ):
            self.event(
                EventType.WORKSPACE_MATERIALISED, {"checkpoint_id": str(loaded.checkpoint.id)}
            )
        if recovery is not None:
            if recovery.kind == "rollback":
                # Calls on the new branch get new ids: nothing of the undone branch replays.
                self.sdk["gen"] = self.state.branch
            self.rerun_failed = recovery.kind == "retry"
            self.event(
                EventType.CONTEXT_ALIGNED,
                {
                    "kind": recovery.kind,
                    "reason": recovery.reason,
                    "actor": recovery.actor,
                    "from_seq": recovery.from_seq,
                    "messages": len(self.sdk["messages"]),
                },
            )
            self.state.recovery = None
        self.event(
            EventType.RESUMED,
            {
                "worker": self.worker_id,
                "epoch": self.epoch,
                "checkpoint_id": str(loaded.checkpoint.id),
                "seq": loaded.checkpoint.seq,
                "messages": len(self.sdk["messages"]),
            },
        )
        self.drift_check(loaded.checkpoint)
        results = self.decisions() if self.sdk.get("deferred") else None
        if not self.sdk["messages"]:  # stopped before the first model turn
            return self.first_prompt(), None
        return None, results

    def drift_check(self, checkpoint: Any) -> None:
        """The code changed since the head was written (agent.sdk_drift): the approvals asked
        for are the calls pending; a stop writes them with a before_review checkpoint."""
        deferred = [d["call_id"] for d in self.sdk.get("deferred") or []]
        sdk_drift_at_pickup(
            self,
            checkpoint,
            calls=[self.ledger[call_id] for call_id in deferred if call_id in self.ledger],
            agent=self.spec.agent.name,
            pause=lambda rows, then: self.pause(
                reason=f"version drift: {rows[0].tool}",
                trigger="before_review",
                inserts=[row for row in rows if row.pk is None],
                updates=[(row, ["status"]) for row in rows if row.pk is not None],
                then=lambda written: then(written.id if written else None),
            ),
        )

    def first_prompt(self) -> str:
        """The spec's input (JSON as its text); empty: the task's goal."""
        prompt = self.spec.agent.input
        if prompt == "":
            return self.spec.goal
        return prompt if isinstance(prompt, str) else json.dumps(prompt)
