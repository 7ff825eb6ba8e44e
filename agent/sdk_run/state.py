"""SdkRun, the base of the SDK runners (OpenAI Agents, Pydantic AI) on ForeignRun: the
harness's own AgentState in the harness's own checkpoints (the SDK's state in `state.sdk`),
the head checkpoint and the ledger this segment starts from, the counters read from the
state, and a stop recorded as the state's last error."""

from __future__ import annotations

from typing import Any

from agent.runtime.run import StopRun
from agent.sdk_run.ending import ForeignRun
from checkpoints.services import checkpoint_next_seq
from harness_base.config import harness_config
from tasks.agent_state import AgentState, ErrorInfo
from tasks.models import Task, ToolCall


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
