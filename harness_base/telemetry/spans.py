"""Spans: started current (`span`) or not (`start_span`/`end_span`), with a chosen parent,
links or ids; attributes, errors and events on them. Each returns at once while traces are
off."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any

from harness_base.telemetry.provider import enabled, next_ids, process_tracer


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
    tracer = process_tracer()
    if tracer is None:
        return None
    from opentelemetry import trace

    context = None
    if parent is not None:
        context = trace.set_span_in_context(trace.NonRecordingSpan(_span_context(*parent)))
    elif ids is not None and ids[0] is not None:
        from opentelemetry.context import Context

        context = Context()  # a root span: whatever is current is not its parent
    token = next_ids.set(ids) if ids is not None else None
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
            next_ids.reset(token)


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
