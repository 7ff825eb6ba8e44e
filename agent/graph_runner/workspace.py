"""The task's workspace in a graph run (GraphRunWorkspace, part of GraphRun): restored
from the head checkpoint's snapshot when the run resumes, snapshotted with each checkpoint."""

from __future__ import annotations

from agent.graph_runner.core import GraphRunCore
from checkpoints.models import GraphWorkspace, GraphWrite
from checkpoints.services import graph_workspace_build
from checkpoints.snapshots import snapshot_capture, snapshot_materialise_if_missing
from tasks.events import EventType


class GraphRunWorkspace(GraphRunCore):
    """GraphRun's workspace: restore_workspace, workspace_snapshot."""

    def restore_workspace(self, checkpoint_id: str, *, source: str | None) -> None:
        """Rebuild the workspace from the head checkpoint's snapshot when it holds no files
        here (another machine, a wiped disk). After a rollback (the head is its fork and no
        node has written against it yet) bring it in line with the snapshot wherever it is."""
        snapshot = (
            GraphWorkspace.objects.filter(task_id=self.task_id, checkpoint_id=checkpoint_id)
            .values_list("snapshot", flat=True)
            .first()
        )
        if snapshot is None:
            return
        self.snapshotted.add(checkpoint_id)
        sync = (
            source == "fork"
            and not GraphWrite.objects.filter(
                thread_id=str(self.task_id), checkpoint_ns="", checkpoint_id=checkpoint_id
            ).exists()
        )
        if snapshot_materialise_if_missing(workspace=self.workspace, manifest=snapshot, sync=sync):
            self.event(EventType.WORKSPACE_MATERIALISED, {"graph_checkpoint_id": checkpoint_id})

    def workspace_snapshot(self, checkpoint_id: str) -> list[GraphWorkspace]:
        """The workspace as this checkpoint leaves it, to store with the super-step's events.
        LangGraph streams a checkpoint before the next super-step's nodes start, so no node
        is writing meanwhile. Incremental: unchanged folders are only stat'ed."""
        if checkpoint_id in self.snapshotted:
            return []
        if (
            not self.snapshotted
            and GraphWorkspace.objects.filter(
                task_id=self.task_id, checkpoint_id=checkpoint_id
            ).exists()
        ):  # the head this run resumed from, already stored by an earlier run
            self.snapshotted.add(checkpoint_id)
            return []
        self.snapshotted.add(checkpoint_id)
        snapshot = snapshot_capture(workspace=self.workspace)
        return [
            graph_workspace_build(
                task_id=self.task_id, checkpoint_id=checkpoint_id, snapshot=snapshot
            )
        ]
