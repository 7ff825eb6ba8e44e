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
`LogContext`); with `HARNESS_LOG_FORMAT=json` they are JSON lines (`JsonFormatter`)."""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import os
import threading
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

log = logging.getLogger("harness.telemetry")

# How long the end of a job waits for its spans to be exported (seconds).
FLUSH_TIMEOUT_S = 2.0
SERVICE_NAME = "agent-harness"
CAPTURE_CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"

_enabled: bool | None = None
_state: _Provider | None = None
_state_lock = threading.Lock()

# Ids the next span takes (trace id only for a span without a parent): see `_Ids`.
_next_ids: contextvars.ContextVar[tuple[int | None, int] | None] = contextvars.ContextVar(
    "harness_next_span_ids", default=None
)
# The log context of the loop (and the task whose span events are recorded live).
_task_id: contextvars.ContextVar[str | None] = contextvars.ContextVar("harness_task", default=None)
_call_id: contextvars.ContextVar[str | None] = contextvars.ContextVar("harness_call", default=None)
_trace_id: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "harness_trace", default=None
)


def _env_true(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in {"1", "true", "yes", "on"}


def enabled() -> bool:
    """Whether traces are exported (read once per process from the environment)."""
    global _enabled
    if _enabled is None:
        exporter = os.environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
        endpoint = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or os.environ.get(
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
        )
        _enabled = (
            not _env_true("OTEL_SDK_DISABLED") and exporter != "none" and bool(exporter or endpoint)
        )
    return _enabled


def capture_content() -> bool:
    """Message contents (prompts, answers, tool arguments and results) go on spans only when
    OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true."""
    return enabled() and _env_true(CAPTURE_CONTENT_ENV)


class _Provider:
    """The SDK objects of one process."""

    def __init__(self) -> None:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        self.pid = os.getpid()
        attributes = {}
        resource_env = os.environ.get("OTEL_RESOURCE_ATTRIBUTES", "")
        if not os.environ.get("OTEL_SERVICE_NAME") and "service.name=" not in resource_env:
            attributes["service.name"] = SERVICE_NAME
        self.provider = TracerProvider(resource=Resource.create(attributes), id_generator=_ids())
        for exporter in _exporters():
            self.provider.add_span_processor(BatchSpanProcessor(_reporting(exporter)))
        self.tracer = self.provider.get_tracer("agent-harness")


def _exporters() -> list[Any]:
    names = [
        n.strip().lower()
        for n in os.environ.get("OTEL_TRACES_EXPORTER", "otlp").split(",")
        if n.strip()
    ]
    exporters = []
    for name in names or ["otlp"]:
        if name == "otlp":
            protocol = os.environ.get(
                "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
            )
            if protocol and protocol != "http/protobuf":
                log.warning(
                    "telemetry: OTLP protocol %s is not installed; exporting over http/protobuf",
                    protocol,
                )
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            exporters.append(OTLPSpanExporter())
        elif name == "console":
            from opentelemetry.sdk.trace.export import ConsoleSpanExporter

            exporters.append(ConsoleSpanExporter())
        else:
            log.warning("telemetry: OTEL_TRACES_EXPORTER=%s is not supported; ignored", name)
    return exporters


def _ids() -> Any:
    from opentelemetry.sdk.trace.id_generator import RandomIdGenerator

    class _Ids(RandomIdGenerator):
        """Random ids, except those a caller of `span` chose for the span it starts."""

        def generate_span_id(self) -> int:
            chosen = _next_ids.get()
            return chosen[1] if chosen is not None else super().generate_span_id()

        def generate_trace_id(self) -> int:
            chosen = _next_ids.get()
            if chosen is not None and chosen[0] is not None:
                return chosen[0]
            return super().generate_trace_id()

    return _Ids()


def _reporting(exporter: Any) -> Any:
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

    class _Reporting(SpanExporter):
        """Never raises; the first failure of the process is logged (the SDK logs the retries
        itself), and a recovery after it."""

        def __init__(self) -> None:
            self.failing = False

        def export(self, spans: Sequence[Any]) -> Any:
            try:
                result = exporter.export(spans)
            except Exception as exc:  # an exporter bug must not stop the export thread
                log.warning("telemetry: exporting spans raised %s: %s", type(exc).__name__, exc)
                result = SpanExportResult.FAILURE
            if result is SpanExportResult.FAILURE and not self.failing:
                self.failing = True
                _report_failure(f"exporting {len(spans)} span(s) failed")
            elif result is SpanExportResult.SUCCESS and self.failing:
                self.failing = False
                log.info("telemetry: exporting spans works again")
            return result

        def shutdown(self) -> None:
            exporter.shutdown()

        def force_flush(self, timeout_millis: int = 30000) -> bool:
            return exporter.force_flush(timeout_millis)

    return _Reporting()


_failure_reported = False


def _report_failure(what: str) -> None:
    global _failure_reported
    if _failure_reported:
        return
    _failure_reported = True
    endpoint = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or os.environ.get(
        "OTEL_EXPORTER_OTLP_ENDPOINT", "the default endpoint"
    )
    log.warning(
        "telemetry: %s (collector %s unreachable?); spans are dropped, the task goes on",
        what,
        endpoint,
    )


def _provider() -> _Provider:
    global _state, _failure_reported
    state = _state
    if state is not None and state.pid == os.getpid():
        return state
    with _state_lock:
        if _state is None or _state.pid != os.getpid():
            _failure_reported = False
            _state = _Provider()
        return _state


def _tracer() -> Any:
    """This process's tracer; None while traces are off, or when the SDK cannot be set up
    from the environment (said once; the process then runs without traces)."""
    global _enabled
    if not enabled():
        return None
    try:
        return _provider().tracer
    except Exception:
        log.exception("telemetry: traces could not be set up from OTEL_* and are off")
        _enabled = False
        return None


def flush() -> None:
    """Export what this process recorded, waiting at most FLUSH_TIMEOUT_S (the end of a job:
    a work horse ends with os._exit, so nothing is exported after it)."""
    state = _state
    if state is None or state.pid != os.getpid():
        return
    try:
        done = state.provider.force_flush(timeout_millis=int(FLUSH_TIMEOUT_S * 1000))
    except Exception as exc:
        done = False
        log.warning("telemetry: flushing spans raised %s: %s", type(exc).__name__, exc)
    if not done:
        _report_failure(f"spans were not exported within {FLUSH_TIMEOUT_S:g}s")


def reset() -> None:
    """Export what is pending, drop this process's provider and read the environment again
    (tests and benchmarks switch traces on and off in one process)."""
    global _enabled, _state, _failure_reported
    if _state is not None and _state.pid == os.getpid():
        _state.provider.shutdown()
    _enabled, _state, _failure_reported = None, None, False


# --- spans ---------------------------------------------------------------------------------


@contextlib.contextmanager
def span(
    name: str,
    *,
    attributes: dict[str, Any] | None = None,
    parent: tuple[int, int] | None = None,
    links: Sequence[tuple[int, int]] = (),
    ids: tuple[int | None, int] | None = None,
) -> Iterator[Any]:
    """A span, current for the block, ended when it exits (an exception sets its error
    status). Yields None while traces are off. `parent`: (trace id, span id) of a span of
    another process or time (else the current span is the parent); `links`: (trace id, span
    id) of spans this one follows from; `ids`: (trace id or None, span id) this span takes."""
    current = start_span(name, attributes=attributes, parent=parent, links=links, ids=ids)
    if current is None:
        yield None
        return
    from opentelemetry import trace

    with trace.use_span(current, end_on_exit=True):
        yield current


def start_span(
    name: str,
    *,
    attributes: dict[str, Any] | None = None,
    parent: tuple[int, int] | None = None,
    links: Sequence[tuple[int, int]] = (),
    ids: tuple[int | None, int] | None = None,
    start_ns: int | None = None,
) -> Any:
    """A span that is not made current, ended by `end_span` (a framework's hooks start and end
    it in different calls; a span recorded after the fact gives `start_ns`, from time.time_ns).
    None while traces are off. The arguments are `span`'s."""
    tracer = _tracer()
    if tracer is None:
        return None
    from opentelemetry import trace

    context = None
    if parent is not None:
        context = trace.set_span_in_context(trace.NonRecordingSpan(_span_context(*parent)))
    elif ids is not None and ids[0] is not None:
        from opentelemetry.context import Context

        context = Context()  # a root span: whatever is current is not its parent
    token = _next_ids.set(ids) if ids is not None else None
    try:
        return tracer.start_span(
            name,
            context=context,
            attributes={k: v for k, v in (attributes or {}).items() if v is not None},
            links=[trace.Link(_span_context(*link)) for link in links],
            start_time=start_ns,
        )
    finally:
        if token is not None:
            _next_ids.reset(token)


def end_span(current: Any, *, end_ns: int | None = None) -> None:
    if current is not None:
        current.end(end_time=end_ns)


def current_parent() -> tuple[int, int] | None:
    """(trace id, span id) of the current span, to pass as `parent` to spans started in
    another thread or event loop; None while traces are off or no span is current."""
    if not enabled():
        return None
    from opentelemetry import trace

    context = trace.get_current_span().get_span_context()
    return (context.trace_id, context.span_id) if context.is_valid else None


def _span_context(trace_id: int, span_id: int) -> Any:
    from opentelemetry.trace import SpanContext, TraceFlags

    return SpanContext(
        trace_id=trace_id,
        span_id=span_id,
        is_remote=True,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
    )


def set_attributes(current: Any, attributes: dict[str, Any]) -> None:
    if current is not None and current.is_recording():
        current.set_attributes({k: v for k, v in attributes.items() if v is not None})


def set_error(current: Any, error_type: str, message: str = "") -> None:
    """Mark the span failed with `error.type` (the semantic conventions' error attribute)."""
    if current is None or not current.is_recording():
        return
    from opentelemetry.trace import Status, StatusCode

    current.set_attribute("error.type", error_type)
    current.set_status(Status(StatusCode.ERROR, message[:500] or None))


def span_event(name: str, attributes: dict[str, Any], *, at: datetime | None = None) -> None:
    """An event on the current span (none while traces are off or no span is current)."""
    if not enabled():
        return
    from opentelemetry import trace

    current = trace.get_current_span()
    if not current.is_recording():
        return
    timestamp = int(at.timestamp() * 1e9) if at is not None else None
    current.add_event(
        name, {k: v for k, v in attributes.items() if v is not None}, timestamp=timestamp
    )


def current_span_id() -> str | None:
    if not enabled():
        return None
    from opentelemetry import trace

    context = trace.get_current_span().get_span_context()
    return f"{context.span_id:016x}" if context.is_valid else None


# --- the context of log lines --------------------------------------------------------------


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
        record.trace_id = _trace_id.get()
        record.span_id = current_span_id() if record.trace_id else None
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
