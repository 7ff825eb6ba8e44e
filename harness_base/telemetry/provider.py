"""The tracer provider of this process: whether traces are on (`enabled`, `capture_content`),
the SDK objects made lazily per process id (exporters, chosen ids, an exporter that never
raises and reports a failure once), `flush` at the end of a job and `reset`."""

from __future__ import annotations

import contextvars
import logging
import os
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from opentelemetry.sdk.trace.export import SpanExporter

log = logging.getLogger("harness.telemetry")

# How long the end of a job waits for its spans to be exported (seconds).
FLUSH_TIMEOUT_S = 2.0
SERVICE_NAME = "agent-harness"
CAPTURE_CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"

_enabled: bool | None = None
_state: _Provider | None = None
_state_lock = threading.Lock()

# Ids the next span takes (trace id only for a span without a parent): see `_Ids`.
next_ids: contextvars.ContextVar[tuple[int | None, int] | None] = contextvars.ContextVar(
    "harness_next_span_ids", default=None
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


def _exporters() -> list[SpanExporter]:
    names = [
        n.strip().lower()
        for n in os.environ.get("OTEL_TRACES_EXPORTER", "otlp").split(",")
        if n.strip()
    ]
    exporters: list[SpanExporter] = []
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
            chosen = next_ids.get()
            return chosen[1] if chosen is not None else super().generate_span_id()

        def generate_trace_id(self) -> int:
            chosen = next_ids.get()
            if chosen is not None and chosen[0] is not None:
                return chosen[0]
            return super().generate_trace_id()

    return _Ids()


def _reporting(exporter: SpanExporter) -> SpanExporter:
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


def process_tracer() -> Any:
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
