"""SdkRun, the base of the SDK runners (OpenAI Agents, Pydantic AI) on ForeignRun: the
harness's own AgentState in the harness's own checkpoints (the SDK's state in `state.sdk`),
the counters read from it, a stop recorded as its last error; the step checkpoint
(`checkpoint_stage`) and a call's start on the ledger (`call_started`)."""

from __future__ import annotations

from typing import Any

from agent.runtime.run import StopRun
from agent.sdk_run.ending import ForeignRun
from agent.versions import versions_current
from checkpoints.models import Blob, Checkpoint
from checkpoints.services import (
    checkpoint_build,
    checkpoint_next_seq,
)
from checkpoints.snapshots import snapshot_capture
from harness_base.config import harness_config
from tasks import services
from tasks.agent_state import AgentState, ErrorInfo
from tasks.events import EventType
from tasks.models import Task, ToolCall, ToolCallStatus


class SdkRun(ForeignRun):
    """A run segment whose state is an AgentState checkpointed by the harness."""

    def __init__(self, task: Task, worker_id: str, *, loaded: Any = None) -> None:
        super().__init__(task, worker_id, loaded=loaded)
        self.config = harness_config()
        self.state = AgentState()
        self.head_id: Any = task.head_checkpoint_id
        self.seq = checkpoint_next_seq(task_id=task.id)
        # call_id -> this task's ledger row (loaded when the run starts).
        self.ledger: dict[str, ToolCall] = {}

    @property
    def step_index(self) -> int:  # type: ignore[override]
        return self.state.step_index

    @property
    def steps_used(self) -> int:  # type: ignore[override]
        return self.state.budget.steps

    @property
    def tokens_used(self) -> int:  # type: ignore[override]
        return self.state.budget.tokens

    def stopping(self, stop: StopRun) -> None:
        self.state.last_error = ErrorInfo(
            error_class=stop.error_class,
            message=stop.message[:2000],
            step_index=self.state.step_index,
        )

    def checkpoint_stage(
        self, trigger: str, *, level: str | None = None, defer: dict[str, Blob] | None = None
    ) -> Checkpoint:
        """The step checkpoint (unsaved; the caller's fenced write inserts it): the state with
        the SDK's, a workspace snapshot (its new blobs into `defer`, to insert with it), the
        code's versions; made head. `level`: the trigger's configured level, else `step`."""
        if level is None:
            configured = self.config.trigger(trigger)
            level = configured.level if configured else "step"
        checkpoint = checkpoint_build(
            task_id=self.task_id,
            seq=self.seq,
            state=self.state,
            level=level,
            trigger=trigger,
            snapshot=snapshot_capture(workspace=self.workspace, defer=defer),
            parent_id=self.head_id,
            versions=versions_current(self),
        )
        self.seq += 1
        self.head_id = checkpoint.id
        return checkpoint

    def call_started(self, row: ToolCall) -> None:
        """A call's row running, one more attempt, on the timeline as the native loop puts it
        (the caller's fenced write saves both before the tool runs)."""
        services.toolcall_transition(
            call=row, to=ToolCallStatus.RUNNING, fields={"attempts": row.attempts + 1}, write=False
        )
        self.event(
            EventType.TOOL_STARTED,
            {
                "call_id": row.call_id,
                "tool": row.tool,
                "attempt": row.attempts,
                "args": row.arguments,
            },
        )
