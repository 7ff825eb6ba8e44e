"""SdkRun, the base of the SDK runners (OpenAI Agents, Pydantic AI) on ForeignRun: the
harness's own AgentState in the harness's own checkpoints (the SDK's state in `state.sdk`),
the counters read from it, a stop recorded as its last error; the step checkpoint
(`checkpoint_stage`), a call's start on the ledger (`call_started`) and the shared pick-up
path (`pick_up`: the head checkpoint verified, the workspace in line with it, a new task's
files; `resumed`: on the timeline, then drift since the head was written, agent.sdk_run.drift).
The SDK's history is stored content-addressed, in chunks shared across checkpoints
(agent.sdk_run.history); a step's outcome is written behind (agent.sdk_run.write_behind).

A runner supplies `calls_pending` (the ledger rows its head holds pending) and `pause_written`
(its pause for review: rows and a before_review checkpoint written, reviews opened)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, NoReturn

from agent.runtime.run import StopRun
from agent.sdk_run.drift import sdk_drift_at_pickup
from agent.sdk_run.ending import ForeignRun
from agent.sdk_run.history import SdkHistory
from agent.sdk_run.model_stream import ModelStream
from agent.sdk_run.workspace import SdkWorkspace
from agent.sdk_run.write_behind import WriteBehind
from agent.versions import versions_current
from checkpoints.models import Blob, Checkpoint
from checkpoints.services import (
    LoadedCheckpoint,
    NoValidCheckpoint,
    checkpoint_build,
    checkpoint_load_latest_valid,
    checkpoint_next_seq,
)
from checkpoints.snapshots import snapshot_materialise_if_missing
from harness_base.config import harness_config
from tasks import services
from tasks.agent_state import AgentState, ErrorInfo
from tasks.canonical import canonical_hash
from tasks.events import EventType
from tasks.models import Task, ToolCall, ToolCallStatus
from tasks.paths import file_write


class SdkRun(SdkHistory, SdkWorkspace, WriteBehind, ForeignRun):
    """A run segment whose state is an AgentState checkpointed by the harness."""

    def __init__(self, task: Task, worker_id: str, *, loaded: Any = None) -> None:
        super().__init__(task, worker_id, loaded=loaded)
        self.config = harness_config()
        self.state = AgentState()
        self.head_id: Any = task.head_checkpoint_id
        self.seq = checkpoint_next_seq(task_id=task.id)
        # call_id -> this task's ledger row (loaded when the run starts).
        self.ledger: dict[str, ToolCall] = {}
        # The model's text while a turn runs, on the task page's live view.
        self.model_stream = ModelStream(task_id=task.id)
        self.proposed: dict[str, str] = {}  # call_id -> hash of the model's args (call_started)
        self.history_init()
        self.workspace_init()

    @property
    def step_index(self) -> int:  # type: ignore[override]  # read-only: the state holds it
        return self.state.step_index

    @property
    def steps_used(self) -> int:  # type: ignore[override]  # read-only: the state holds it
        return self.state.budget.steps

    @property
    def tokens_used(self) -> int:  # type: ignore[override]  # read-only: the state holds it
        return self.state.budget.tokens

    def closed(self) -> None:
        self.collect_at_end()
        self.model_stream.close()
        self.workspace_close()

    def stopping(self, stop: StopRun) -> None:
        self.state.last_error = ErrorInfo(
            error_class=stop.error_class,
            message=stop.message[:2000],
            step_index=self.state.step_index,
        )

    def checkpoint_stage(
        self,
        trigger: str,
        *,
        level: str | None = None,
        defer: dict[str, Blob] | None = None,
        rescan: bool = True,
    ) -> Checkpoint:
        """The step checkpoint, made head, unsaved (the caller's fenced write inserts it with
        `defer`'s new snapshot blobs and `blobs`' history chunks and compression base): the
        state, a workspace snapshot (`delta` as the native loop's), the code's versions.
        `level`: the trigger's configured level, else `step`. `rescan`: agent.sdk_run.workspace."""
        if level is None:
            configured = self.config.trigger(trigger)
            level = configured.level if configured else "step"
        snapshot = self.workspace_snapshot(rescan=rescan, defer=defer)
        checkpoint = checkpoint_build(
            task_id=self.task_id,
            seq=self.seq,
            state=self.state_stored(),
            level=level,
            trigger=trigger,
            snapshot=snapshot,
            parent_id=self.head_id,
            codec=self.codec,
            versions=versions_current(self),
        )
        self.bases_stored()
        self.seq += 1
        self.head_id = checkpoint.id
        return checkpoint

    def call_started(self, row: ToolCall) -> None:
        """A call's row running, one more attempt, on the timeline as the native loop puts it
        (the caller's fenced write saves both before the tool runs); its arguments only if
        not those the model proposed (the decision and the row hold them)."""
        services.toolcall_transition(
            call=row, to=ToolCallStatus.RUNNING, fields={"attempts": row.attempts + 1}, write=False
        )
        started = {"call_id": row.call_id, "tool": row.tool, "attempt": row.attempts}
        proposed = self.proposed.pop(row.call_id, None) == canonical_hash(row.arguments)
        self.event(EventType.TOOL_STARTED, started | ({} if proposed else {"args": row.arguments}))

    def pick_up(self, fresh: dict[str, Any]) -> LoadedCheckpoint | None:
        """The head checkpoint (verified; a fallback to an older one recorded), its state and
        the workspace brought in line with it. None: a new task, its workspace files written and
        its state's SDK part `fresh` (the caller writes its task_start checkpoint)."""
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
            self.state = AgentState(sdk=fresh)
            self.event(EventType.TASK_STARTED, {"worker": self.worker_id, "epoch": self.epoch})
            return None
        self.state = loaded.state
        if (self.state.sdk or {}).get("kind") != fresh["kind"]:
            raise StopRun(
                "checkpoint_corrupted", f"the head checkpoint holds no {fresh['kind']} state"
            )
        self.history_restored()
        if loaded.checkpoint.id != self.head_id:
            self.event(
                EventType.CHECKPOINT_FALLBACK,
                {"checkpoint_id": str(loaded.checkpoint.id), "seq": loaded.checkpoint.seq},
            )
            self.head_id = loaded.checkpoint.id
        if snapshot_materialise_if_missing(
            workspace=self.workspace,
            manifest=loaded.snapshot,
            sync=self.state.recovery is not None,
        ):
            self.event(
                EventType.WORKSPACE_MATERIALISED, {"checkpoint_id": str(loaded.checkpoint.id)}
            )
        return loaded

    def resumed(self, loaded: LoadedCheckpoint, **extra: Any) -> None:
        head = {"checkpoint_id": str(loaded.checkpoint.id), "seq": loaded.checkpoint.seq}
        self.event(
            EventType.RESUMED, {"worker": self.worker_id, "epoch": self.epoch, **head, **extra}
        )
        # The code changed since the head was written: drift that touches what runs next stops.
        sdk_drift_at_pickup(
            self,
            loaded.checkpoint,
            calls=self.calls_pending(),
            agent=str(getattr(self.spec.agent, self.NAME_KEY)),
            pause=lambda rows, then: self.pause_written(
                f"version drift: {rows[0].tool}", rows, then
            ),
        )

    def calls_pending(self) -> Iterable[ToolCall]:
        """The ledger rows of the calls the head checkpoint holds pending."""
        raise NotImplementedError

    def pause_written(
        self, reason: str, rows: list[ToolCall], then: Callable[[Any], None]
    ) -> NoReturn:
        """Pause for review: `rows` (new ones inserted, others' status updated) and a
        before_review checkpoint written, then(its id) (the reviews opened), the task
        waiting_review, in one transaction."""
        raise NotImplementedError
