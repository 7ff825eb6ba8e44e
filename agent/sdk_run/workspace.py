"""SdkWorkspace, the part of SdkRun (agent.sdk_run.state) that snapshots the run's workspace for
its checkpoints: the last snapshot is reused by a checkpoint made with no tool run since (a
model turn's); after a tool, the files the workspace's inotify watch saw change are looked at
again (checkpoints.snapshots.watch: an SDK tool does not say what it wrote), or every folder
when the watch cannot say."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from checkpoints.models import Blob
from checkpoints.snapshots import snapshot_capture
from checkpoints.snapshots.watch import WorkspaceWatch


class SdkWorkspace:
    """A run's workspace snapshots and their watch (`workspace_close` releases it)."""

    workspace: Path
    # The workspace snapshot of the last checkpoint (agent.sdk_run.history keeps it: a failed
    # write forgets it).
    snapshot: dict[str, Any] | None

    def workspace_init(self) -> None:
        self.watch = WorkspaceWatch(self.workspace)

    def workspace_snapshot(self, *, rescan: bool, defer: dict[str, Blob] | None) -> dict[str, Any]:
        """The snapshot for the next checkpoint (`defer`: snapshot_capture's)."""
        if rescan or self.snapshot is None:
            self.snapshot = snapshot_capture(
                workspace=self.workspace, changed=self.watch.changed(), defer=defer, delta=True
            )
        return self.snapshot

    def workspace_close(self) -> None:
        self.watch.close()
