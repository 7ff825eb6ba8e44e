"""The context of log lines: the ids of the loop (`log_context`, `active_task`), added to
every record by `LogContext`, and `JsonFormatter` for HARNESS_LOG_FORMAT=json."""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from harness_base.telemetry.spans import current_span_id

# The log context of the loop (and the task whose span events are recorded live).
_task_id: contextvars.ContextVar[str | None] = contextvars.ContextVar("harness_task", default=None)
_call_id: contextvars.ContextVar[str | None] = contextvars.ContextVar("harness_call", default=None)
_trace_id: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "harness_trace", default=None
)


@contextlib.contextmanager
def log_context(
    *, task_id: Any = None, call_id: str | None = None, trace_id: str | None = None
) -> Iterator[None]:
    """Log lines (and span events: `active_task`) inside the block carry these ids."""
    tokens = []
    for var, value in ((_task_id, task_id), (_call_id, call_id), (_trace_id, trace_id)):
        if value is not None:
            tokens.append((var, var.set(str(value))))
    try:
        yield
    finally:
        for var, token in reversed(tokens):
            var.reset(token)


def active_task() -> str | None:
    """The task whose run this thread is in (its span events are recorded live)."""
    return _task_id.get()


class LogContext(logging.Filter):
    """Adds `task_id`, `call_id`, `trace_id` and `span_id` to every record (None outside the
    loop)."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.task_id = _task_id.get()
        record.call_id = _call_id.get()
        record.trace_id = trace_id = _trace_id.get()
        record.span_id = current_span_id() if trace_id else None
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object a line: time (UTC, ISO 8601), level, logger, message, the ids of
    LogContext, and the exception's traceback if any."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "task_id": getattr(record, "task_id", None),
            "call_id": getattr(record, "call_id", None),
            "trace_id": getattr(record, "trace_id", None),
            "span_id": getattr(record, "span_id", None),
            "process": record.process,
        }
        if record.exc_info:
            line["exc_info"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False, default=str)
