"""(info) The loop with traces exported: steps per second with OpenTelemetry export on, against
a live OTLP/HTTP receiver on loopback, and off.

Ours: `agent.runtime.task_run` in-process against PostgreSQL (the `read` variant of
bench/loop/: the `noop` test tool, one call per turn), the tracer provider made afresh for
each run and flushed at its end, as a work horse does (harness_base/telemetry/). The
receiver (`OtlpReceiver`, also the counterpart of tests/durable/test_telemetry.py) decodes
every request with `opentelemetry-proto` and answers 200, so the export is the real one; it
runs in a process of its own, as a collector does (decoding in the measured process would
charge the loop for the collector's work).
Off and on alternate per repetition.

Expected run time (quiet 2-CPU machine): smoke ~10 s; full ~1 min.
"""

from __future__ import annotations

import contextlib
import gzip
import multiprocessing
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from bench.common import figure, rate_stats, timed
from bench.loop import ours_cleanup, ours_prepare, ours_run

TITLE = "Loop with traces exported"
SIZES = {"smoke": {"steps": 4, "repeat": 2}, "full": {"steps": 100, "repeat": 7}}
# Traces must not cost the loop more than this (steps/s with export ÷ without).
TARGET_RATIO = 0.9


@dataclass
class ReceivedSpan:
    trace_id: str
    span_id: str
    parent_span_id: str
    name: str
    attributes: dict[str, Any]
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    links: list[tuple[str, str]] = field(default_factory=list)
    status_code: int = 0
    resource: dict[str, Any] = field(default_factory=dict)

    def events_named(self, name: str) -> list[dict[str, Any]]:
        return [attributes for event, attributes in self.events if event == name]


def _value(any_value: Any) -> Any:
    kind = any_value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in any_value.array_value.values]
    if kind == "kvlist_value":
        return _attributes(any_value.kvlist_value.values)
    return getattr(any_value, kind) if kind else None


def _attributes(pairs: Any) -> dict[str, Any]:
    return {pair.key: _value(pair.value) for pair in pairs}


class OtlpReceiver:
    """An OTLP/HTTP trace receiver on loopback: POST /v1/traces with a protobuf
    ExportTraceServiceRequest (gzip or not) is decoded and its spans kept (`spans`)."""

    def __init__(self) -> None:
        self.spans: list[ReceivedSpan] = []
        self.requests = 0
        self.lock = threading.Lock()
        self.server: ThreadingHTTPServer | None = None

    @property
    def endpoint(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def receive(self, body: bytes) -> None:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
        )

        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        received = []
        for resource_spans in request.resource_spans:
            resource = _attributes(resource_spans.resource.attributes)
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    received.append(
                        ReceivedSpan(
                            trace_id=span.trace_id.hex(),
                            span_id=span.span_id.hex(),
                            parent_span_id=span.parent_span_id.hex(),
                            name=span.name,
                            attributes=_attributes(span.attributes),
                            events=[(e.name, _attributes(e.attributes)) for e in span.events],
                            links=[
                                (link.trace_id.hex(), link.span_id.hex()) for link in span.links
                            ],
                            status_code=span.status.code,
                            resource=resource,
                        )
                    )
        with self.lock:
            self.requests += 1
            self.spans.extend(received)

    def snapshot(self) -> list[ReceivedSpan]:
        with self.lock:
            return list(self.spans)

    def __enter__(self) -> OtlpReceiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                if self.path != "/v1/traces":
                    self.send_response(404)
                    self.end_headers()
                    return
                receiver.receive(body)
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()
        return self

    def __exit__(self, *exc: Any) -> None:
        assert self.server is not None
        self.server.shutdown()
        self.server.server_close()


_EXPORT_ENV = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_TRACES_EXPORTER")


@contextlib.contextmanager
def traces_exported(endpoint: str | None) -> Iterator[None]:
    """Traces exported to `endpoint` in this process for the block (None: off)."""
    from harness_base import telemetry

    saved = {name: os.environ.pop(name, None) for name in _EXPORT_ENV}
    if endpoint is not None:
        os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = endpoint
    telemetry.reset()
    try:
        yield
    finally:
        for name, value in saved.items():
            os.environ.pop(name, None)
            if value is not None:
                os.environ[name] = value
        telemetry.reset()


def _sample(steps: int, endpoint: str | None) -> float:
    with traces_exported(endpoint):
        task = ours_prepare(steps, "read")
        try:
            return timed(lambda: ours_run(task))
        finally:
            ours_cleanup(task)


def _serve(conn: Any) -> None:
    """The receiver's own process (a collector is never inside the worker): send its
    endpoint, serve until told to stop, then send the names of the spans it decoded."""
    with OtlpReceiver() as receiver:
        conn.send(receiver.endpoint)
        conn.recv()
        conn.send([span.name for span in receiver.snapshot()])


@contextlib.contextmanager
def receiver_process() -> Iterator[tuple[str, list[str]]]:
    """(endpoint, names): a live OTLP/HTTP receiver in a child process; `names` is filled with
    the names of the spans it received when the block ends."""
    context = multiprocessing.get_context("fork")
    ours, theirs = context.Pipe()
    process = context.Process(target=_serve, args=(theirs,), daemon=True)
    process.start()
    names: list[str] = []
    try:
        yield ours.recv(), names
    finally:
        ours.send("stop")
        names.extend(ours.recv())
        process.join(10)


def run(size: str) -> dict[str, Any]:
    params = SIZES[size]
    steps, repeat = params["steps"], params["repeat"]
    seconds: dict[str, list[float]] = {"off": [], "on": []}
    with receiver_process() as (endpoint, spans):
        _sample(3, None)
        _sample(3, endpoint)
        for i in range(repeat):
            order = ("off", "on") if i % 2 == 0 else ("on", "off")
            for mode in order:
                seconds[mode].append(_sample(steps, endpoint if mode == "on" else None))
    # Every run with export on (the warm-up's too) sent its segment's span.
    segments = sum(name.startswith("invoke_agent") for name in spans)
    if segments != repeat + 1:
        raise RuntimeError(f"the receiver got {segments} run segments, expected {repeat + 1}")
    on = rate_stats(seconds["on"], count=steps)
    off = rate_stats(seconds["off"], count=steps)
    ratio = on["median"] / off["median"]
    return {
        "title": TITLE,
        "figures": [
            figure(
                figure=f"no-op: steps/s at {steps} steps, traces exported (OTLP/HTTP, loopback)",
                unit="steps/s",
                ours=on,
                reference=off,
                reference_label="traces off",
                target=f"≥ {TARGET_RATIO}× off",
                met=ratio >= TARGET_RATIO,
                note=f"{len(spans)} spans received",
            )
        ],
    }
