"""The running call's output, published while it runs (tasks.outputs.live_output_put): one
thread per run, started with its first call, that sends the call's output at most every
PUBLISH_S while it changes. A call that ends within PUBLISH_S is never published (the
fast path of a step stays free of it); one that runs longer shows on the task page as
running, with its elapsed time and its streams as they arrive."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.utils import timezone

from tasks.outputs import CallOutput, live_output_put

PUBLISH_S = 0.5


@dataclass
class _Call:
    call_id: str
    tool: str
    attempt: int
    started_at: datetime
    output: CallOutput
    # The output's version last sent; None: not published yet.
    sent: int | None = None


class LiveOutput(threading.Thread):
    def __init__(self, *, task_id: Any) -> None:
        super().__init__(daemon=True, name=f"live-output-{task_id}")
        self.task_id = task_id
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._done = False
        self._call: _Call | None = None

    def begin(self, *, call_id: str, tool: str, attempt: int, output: CallOutput) -> None:
        """A call starts: published once it has run PUBLISH_S."""
        with self._lock:
            self._call = _Call(
                call_id=call_id,
                tool=tool,
                attempt=attempt,
                started_at=timezone.now(),
                output=output,
            )
        if not self.is_alive() and not self._done:
            self.start()

    def end(self) -> None:
        """The call ended: a published one is sent a last time, marked finished (kept for a
        while: a worker lost before the outcome is written leaves it to the review)."""
        with self._lock:
            call, self._call = self._call, None
        if call is not None and call.sent is not None:
            self._send(call, finished=True)

    def close(self) -> None:
        self._done = True
        self._wake.set()

    def _send(self, call: _Call, *, finished: bool = False) -> None:
        call.sent = call.output.version
        live_output_put(
            task_id=self.task_id,
            call_id=call.call_id,
            tool=call.tool,
            attempt=call.attempt,
            started_at=call.started_at,
            output=call.output,
            finished=finished,
        )

    def run(self) -> None:
        while not self._wake.wait(PUBLISH_S / 2):
            with self._lock:
                call = self._call
                if (
                    call is not None
                    and (timezone.now() - call.started_at).total_seconds() >= PUBLISH_S
                    and call.sent != call.output.version
                ):
                    self._send(call)
