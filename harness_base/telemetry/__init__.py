"""Telemetry plumbing: OpenTelemetry traces and the context of log lines.

Traces are off unless `OTEL_EXPORTER_OTLP_ENDPOINT` (or `..._TRACES_ENDPOINT`) or
`OTEL_TRACES_EXPORTER` is set (`OTEL_TRACES_EXPORTER=none` or `OTEL_SDK_DISABLED=true` turn them
off again); the standard `OTEL_*` variables configure the SDK, its batch processor and the
OTLP/HTTP exporter. While off, nothing here imports the SDK and every helper returns at once.

RQ runs each job in a forked work horse that ends with `os._exit`: no atexit hook runs there,
and a batch processor's export thread does not survive a fork. So the tracer provider is made
lazily in the process that first records a span (a horse, never the worker that forks it),
made again if the process id changed, and `flush()` (bounded by FLUSH_TIMEOUT_S) is called
when the job ends. Exporting never raises into the loop and never blocks it: spans go to a
batch processor's thread; a collector that cannot be reached is logged once per process.

Span and trace ids can be chosen (`span(..., ids=...)`): the harness derives a task's trace id
and the ids of its run segments from the task, so a trace survives a pause of any length
without storing anything (tasks/tracing.py).

Log lines of the loop carry the task id, the call id and the trace id (`log_context`,
`LogContext`); with `HARNESS_LOG_FORMAT=json` they are JSON lines (`JsonFormatter`).

The modules, from the bottom: `provider` (on or off, this process's tracer provider, flush,
reset), `spans` (starting, ending and annotating spans) and `logs` (the context of log lines,
LogContext, JsonFormatter). Callers import from this package (the LOGGING setting names
`harness_base.telemetry.LogContext` and `.JsonFormatter`).
"""

from __future__ import annotations

from harness_base.telemetry.logs import JsonFormatter, LogContext, active_task, log_context
from harness_base.telemetry.provider import (
    CAPTURE_CONTENT_ENV,
    FLUSH_TIMEOUT_S,
    SERVICE_NAME,
    capture_content,
    enabled,
    flush,
    reset,
)
from harness_base.telemetry.spans import (
    current_parent,
    current_span_id,
    end_span,
    set_attributes,
    set_error,
    span,
    span_event,
    start_span,
)

__all__ = [
    "CAPTURE_CONTENT_ENV",
    "FLUSH_TIMEOUT_S",
    "SERVICE_NAME",
    "JsonFormatter",
    "LogContext",
    "active_task",
    "capture_content",
    "current_parent",
    "current_span_id",
    "enabled",
    "end_span",
    "flush",
    "log_context",
    "reset",
    "set_attributes",
    "set_error",
    "span",
    "span_event",
    "start_span",
]
