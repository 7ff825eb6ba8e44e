"""An SDK agent's model turn on the task page's live view, as it is written (ModelStream): the
text the model streams goes into the same live record a running tool call's output does
(agent.runtime.live, tasks.outputs.live_output_put), under the tool name `model` and the
call id `turn N`. A turn that ends within PUBLISH_S is never published, as for a tool call;
nothing of it is durable (the turn's checkpoint and events are written as before)."""

from __future__ import annotations

from typing import Any

from agent.runtime.live import LiveOutput
from tasks.outputs import CallOutput

# The live record's tool and stream names for a model turn.
MODEL_TOOL = "model"
TEXT_STREAM = "text"


class ModelStream:
    """One per run segment: `begin` a turn, `text` as deltas arrive, `end` it; `close` with
    the segment. Safe to call from the SDK's event loop (no database)."""

    def __init__(self, *, task_id: Any) -> None:
        self.task_id = task_id
        self._live: LiveOutput | None = None
        self._output: CallOutput | None = None

    def begin(self, *, turn: int) -> None:
        if self._live is None:
            self._live = LiveOutput(task_id=self.task_id)
        self._output = CallOutput()
        self._live.begin(call_id=f"turn {turn}", tool=MODEL_TOOL, attempt=1, output=self._output)

    def text(self, delta: str) -> None:
        if self._output is not None and delta:
            self._output.write(TEXT_STREAM, delta.encode("utf-8", errors="replace"))

    def written(self) -> bool:
        """Whether the turn begun last has streamed any text."""
        return self._output is not None and self._output.version > 0

    def end(self) -> None:
        self._output = None
        if self._live is not None:
            self._live.end()

    def close(self) -> None:
        if self._live is not None:
            self._live.close()
