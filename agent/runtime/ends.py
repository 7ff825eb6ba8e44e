"""The exceptions that end a run's job before its task is done: StopRun (a terminal outcome)
and Paused (the task waits in waiting_review, waiting_children or retry_wait)."""

from __future__ import annotations

from typing import Any


class StopRun(Exception):
    """Ends the run with a terminal outcome. `payload`: more for its `task_stopped` event (a
    graph run's: the reviews whose rejection stopped it)."""

    def __init__(
        self, error_class: str, message: str, *, payload: dict[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        self.error_class = error_class
        self.message = message
        self.payload = payload or {}


class Paused(Exception):
    """The task moved to waiting_review (or retry_wait); the job ends."""
