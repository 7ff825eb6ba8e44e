"""WriteBehind, the part of SdkRun (agent.sdk_run.state) that sends a step's outcome write
without waiting for its commit (tasks.services.write_behind) and collects it before the run's
next write, so a step waits on one fsync (its intent's) instead of two.

What may be sent behind: a write after which nothing runs that depends on it being durable
until the next write — a step's outcome (the calls settled, the `after_step` checkpoint, their
events). A crash before it commits leaves the calls `running`, of unknown outcome, exactly as a
crash while the tool ran (or between the tool and a synchronous outcome write) would: such a
call is never re-run blindly. Everything else waits for it: the next write (a call's intent
before its tool runs, a pause, the end) collects it first (`collect`), and a write it refused
(a lost lease) or that failed stops the run there, before the next call's effect. The segment's
end collects whatever is still in flight (`collect_at_end`).

Between the send and the collect the run reads only what the write does not touch (the review
rules); the model turn and the SDK's own work run meanwhile."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from tasks.services.write_behind import (
    PendingWrite,
    task_fenced_write_behind,
    write_behind_release,
)

log = logging.getLogger(__name__)


class WriteBehind:
    """A run's outcome write in flight and its collection."""

    cancel_seen: bool
    task_id: Any
    pending_write: tuple[PendingWrite, Callable[[], None]] | None = None

    def write_behind(self, *, failed: Callable[[], None], **write: Any) -> None:
        """Send the fenced write `write` (task_fenced_write's arguments) behind; `failed()`
        undoes the writer's bookkeeping if it does not commit (run before its error is
        raised by `collect`). Collects the one in flight first."""
        self.collect()
        try:
            sent = task_fenced_write_behind(**write)
        except BaseException:  # written in place (see write_behind_possible) and refused
            failed()
            raise
        if sent.sent:
            self.pending_write = (sent, failed)
        else:
            self.cancel_seen = sent.wait()

    def collect(self) -> None:
        """Wait for the write in flight to commit: raises what refused or failed it."""
        pending, self.pending_write = self.pending_write, None
        if pending is None:
            return
        write, failed = pending
        try:
            cancel = write.wait()
        except BaseException:
            failed()
            raise
        self.cancel_seen = self.cancel_seen or cancel

    def collect_at_end(self) -> None:
        """The segment's end, however it ended: no write left in flight, the writer's
        connection closed. An error here was the run's to see, had it written again."""
        try:
            self.collect()
        except Exception as exc:
            log.warning("task %s: the last outcome write failed: %s", self.task_id, exc)
        finally:
            write_behind_release()
