"""The run's beginning (RunStart, part of AgentsRun): a new task's workspace files and
task_start checkpoint, or the head checkpoint resumed (verified; the workspace brought in
line, a recovery's branch taken, the ledger loaded); the SDK's first input."""

from __future__ import annotations

from typing import Any

from agent.openai_agents_runner.reviews import ReviewPauses
from agent.openai_agents_runner.values import KIND
from agent.runtime.run import StopRun
from agent.sdk_drift import sdk_drift_at_pickup
from checkpoints.services import NoValidCheckpoint, checkpoint_load_latest_valid
from checkpoints.snapshots import snapshot_materialise_if_missing
from tasks.events import EventType
from tasks.models import ToolCall
from tasks.paths import file_write


class RunStart(ReviewPauses):
    """AgentsRun's start: start, first_input."""

    def start(self) -> None:
        """A new task: its workspace files and the task_start checkpoint. Otherwise resume the
        head checkpoint (verified): the workspace brought in line with it, the ledger loaded."""
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
            self.state.sdk = {"kind": KIND, "agent": self.spec.agent.name, "run_state": None}
            self.event(EventType.TASK_STARTED, {"worker": self.worker_id, "epoch": self.epoch})
            self.commit(checkpoint=("task_start", "task"))
            return
        self.state = loaded.state
        if loaded.checkpoint.id != self.head_id:
            self.event(
                EventType.CHECKPOINT_FALLBACK,
                {"checkpoint_id": str(loaded.checkpoint.id), "seq": loaded.checkpoint.seq},
            )
            self.head_id = loaded.checkpoint.id
        recovery = self.state.recovery
        if snapshot_materialise_if_missing(
            workspace=self.workspace, manifest=loaded.snapshot, sync=recovery is not None
        ):
            self.event(
                EventType.WORKSPACE_MATERIALISED, {"checkpoint_id": str(loaded.checkpoint.id)}
            )
        if recovery is not None and recovery.kind == "rollback":
            # The calls after the checkpoint were undone: the SDK's pending calls run again
            # under new call ids (the rollback's branch).
            self.state.sdk = {**(self.state.sdk or {}), "branch": self.state.branch}
        if recovery is not None:
            self.event(
                EventType.CONTEXT_ALIGNED,
                {"kind": recovery.kind, "reason": recovery.reason, "undone": recovery.undone},
            )
            self.state.recovery = None
            self.state.last_error = None
        self.ledger = {
            row.call_id: row
            for row in ToolCall.objects.filter(
                task_id=self.task_id, call_id__startswith=f"oa{self.sdk_branch()}:"
            )
        }
        self.event(
            EventType.RESUMED,
            {
                "worker": self.worker_id,
                "epoch": self.epoch,
                "checkpoint_id": str(loaded.checkpoint.id),
                "seq": loaded.checkpoint.seq,
            },
        )
        # The code changed since the head was written (agent.sdk_drift): this branch's calls
        # approved or allowed and not run yet are pending.
        sdk_drift_at_pickup(
            self,
            loaded.checkpoint,
            calls=self.ledger.values(),
            agent=self.spec.agent.name,
            pause=lambda rows, then: self.pause_written(
                f"version drift: {rows[0].tool}", rows, then
            ),
        )

    def first_input(self) -> Any:
        given = self.spec.agent.input
        return given if given else self.spec.goal
