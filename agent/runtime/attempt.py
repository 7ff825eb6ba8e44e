"""The attempt of a tool call: the tool runs in a helper thread under its timeout, and what
it returned or raised becomes a ToolOutcome. No durable write: agent.runtime.call_execute
records it."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from agent.retry import TIMEOUT, TOOL_ERROR_CLASSES, classify_exception
from agent.runtime.run import OBSERVATION_MAX_CHARS, Run
from agent.runtime.watchdog import InThread
from harness_base.metrics import (
    TOOL_CALL_SECONDS,
    TOOL_FAILURES,
    label_bounded,
    metric_inc,
    metric_observe,
)
from tasks.canonical import nul_free
from tasks.errors import CANCELED_ERROR
from tasks.feedback import compact_feedback
from tasks.models import ToolCallStatus
from tasks.tools.registry import ToolContext, ToolError, ToolSpec

log = logging.getLogger(__name__)

# After a tool's timeout its stop event is set; it gets this long to stop (run_command kills its
# process group: SIGTERM, then SIGKILL after 2 s) before the call is abandoned.
TOOL_STOP_GRACE_S = 3.0


@dataclass
class ToolOutcome:
    status: str
    observation: str
    result: Any = None
    error_class: str = ""
    error_message: str = ""
    retry_after_s: float | None = None
    # The call ignored its stop and was left running: it may still take effect.
    abandoned: bool = False
    # Images for the model (ToolContext.media), joined to the result message.
    media: list[Any] = field(default_factory=list)


def observation(result: Any) -> str:
    """A result as the model reads it: JSON text, cut at OBSERVATION_MAX_CHARS."""
    text = (
        result if isinstance(result, str) else json.dumps(result, ensure_ascii=False, default=str)
    )
    if len(text) > OBSERVATION_MAX_CHARS:
        cut = len(text) - OBSERVATION_MAX_CHARS
        text = text[:OBSERVATION_MAX_CHARS] + f"… [truncated {cut} chars]"
    return text


def invoke(run: Run, tool: ToolSpec, ctx: ToolContext, args: Any) -> ToolOutcome:
    """One attempt of a tool call (`_invoke`), timed and counted by tool (harness_base.metrics);
    a cancel is not the tool's failure."""
    started = time.monotonic()
    outcome = _invoke(run, tool, ctx, args)
    tool_attempt_record(
        tool=tool_label(run, tool.name),
        seconds=time.monotonic() - started,
        error_class="" if outcome.status == ToolCallStatus.SUCCEEDED else outcome.error_class,
    )
    return outcome


def tool_attempt_record(*, tool: str, seconds: float, error_class: str = "") -> None:
    """One attempt of a tool call, of any runner (this loop, graphs, the SDK runners), in the
    metrics: timed by `tool` (a label the caller bounded: `tool_label`, `tool_label_known`)
    and, when it failed (`error_class` set; a cancel is not the tool's failure), counted by
    error class: the taxonomy's (agent.retry.TOOL_ERROR_CLASSES), anything else `other`."""
    metric_observe(TOOL_CALL_SECONDS, seconds, tool=tool)
    if error_class and error_class != CANCELED_ERROR:
        known = error_class if error_class in TOOL_ERROR_CLASSES else "other"
        metric_inc(TOOL_FAILURES, tool=tool, error_class=known)


def tool_label_known(name: str, known: set[str] | frozenset[str]) -> str:
    """A tool's name as a metric label for a runner whose tools are an operator's code: kept
    when the code registered it (`known`), else `other` (an MCP server's, or a name the model
    made up that the framework answered with an error)."""
    return label_bounded(name, known)


def tool_exception_class(exc: BaseException) -> str:
    """The error class of an exception a tool raised: its own ToolError class, else by type;
    a tool cancelled (its task stopped) did not fail."""
    if isinstance(exc, ToolError):
        return exc.error_class
    if isinstance(exc, asyncio.CancelledError):
        return CANCELED_ERROR
    return classify_exception(exc)


def tool_label(run: Run, name: str) -> str:
    """A tool's name as a metric label: a registered tool's, or an MCP tool's the spec names
    itself; a tool a `server__*` wildcard let in (its name is the server's choice) counts as
    `server__*`. The set of labels is bounded by code and configuration, never by a server."""
    if name in run.spec.tools or name not in run.mcp_specs:
        return name
    server, _, _ = name.partition("__")
    return f"{server}__*"


def _invoke(run: Run, tool: ToolSpec, ctx: ToolContext, args: Any) -> ToolOutcome:
    """Run the tool in a helper thread so the timeout holds even for tools that ignore
    it. On timeout `ctx.stop` is set — cooperating tools stop, run_command kills its
    process group — and after a short grace the call is abandoned: its late result is
    never recorded, and its stop event stays set."""
    run.watchdog.watch_call(ctx.stop)
    # The files the call changes are known only from a tool that reports them, and only
    # once it has returned (an abandoned call may still write).
    snapshot, run.snapshot = run.snapshot, None
    try:
        call = InThread(
            lambda: tool.func(ctx, args),
            name=f"tool-{ctx.call_id}",
            layer="tool",
            timeout_s=ctx.timeout_s,
        )
        if not call.wait():
            ctx.stop.set()
            abandoned = not call.wait(TOOL_STOP_GRACE_S)
            if not abandoned and tool.reports_changes:
                run.snapshot = snapshot
                run.changed |= ctx.changed
            if run.watchdog.cancel_requested.is_set():
                return failed_outcome(
                    tool, ToolError("stopped: task canceled", error_class="canceled")
                )
            message = f"{tool.name} exceeded its {ctx.timeout_s:g}s timeout (layer: tool)"
            return ToolOutcome(
                status=ToolCallStatus.TIMED_OUT,
                error_class=TIMEOUT,
                error_message=message,
                abandoned=abandoned,
                observation=compact_feedback(
                    what=message,
                    expected=f"{tool.name} to finish in time",
                    check="use smaller inputs or a different approach",
                ),
            )
    finally:
        run.watchdog.watch_call(None)
    if tool.reports_changes:
        run.snapshot = snapshot
        run.changed |= ctx.changed
    if call.error is not None:
        return failed_outcome(tool, call.error)
    result = call.value
    if hasattr(result, "model_dump"):
        result = result.model_dump(mode="json")
    try:
        json.dumps(result)
    except (TypeError, ValueError):
        result = {"value": str(result)}
    result = nul_free(result)
    return ToolOutcome(
        status=ToolCallStatus.SUCCEEDED,
        observation=observation(result),
        result=result,
        media=list(ctx.media),
    )


def failed_outcome(tool: ToolSpec, exc: BaseException) -> ToolOutcome:
    """Classify a tool's exception: its own ToolError class, else by exception type."""
    if isinstance(exc, ToolError):
        error_class, retry_after_s, what = exc.error_class, exc.retry_after_s, str(exc)
    else:
        log.error("tool %s raised", tool.name, exc_info=exc)
        error_class, retry_after_s = classify_exception(exc), None
        what = f"{type(exc).__name__}: {exc}"
    what = nul_free(what)
    status = ToolCallStatus.FAILED
    if error_class == TIMEOUT:
        status = ToolCallStatus.TIMED_OUT
        what = f"{what} (layer: tool)"
    # A limit the call hit (the disk quota) is kept with the failure, as a command's
    # result keeps it: `limits_hit`.
    limits_hit = getattr(exc, "limits_hit", None)
    return ToolOutcome(
        status=status,
        result={"limits_hit": list(limits_hit)} if limits_hit else None,
        error_class=error_class,
        error_message=what,
        retry_after_s=retry_after_s,
        observation=compact_feedback(
            what=f"{tool.name} failed: {what}",
            expected=f"{tool.name} to succeed",
            check="read the error and adjust the arguments",
        ),
    )
