"""How a rollback undoes one call outside the workspace (`compensation_for`): the compensating
call, or why the call cannot be undone, or nothing to undo.

One computation for the rollback preview (checkpoints.selectors.rollback_plan) and for the
rollback that runs the compensations. A compensation comes from the tool's declaration
(`@tool(compensate=Compensate(...))`, tasks.tools.compensate), from `harness.yaml` for an MCP
server's tool (`mcp_servers.<name>.compensations`) or for an HTTP request
(`http.compensations`); its arguments are computed from the original call's arguments and its
recorded result, and checked against the compensating tool's argument schema. Whatever goes
wrong there (an args function that raises, a template whose path is missing, arguments the
tool refuses) makes the call `Irreversible` with the reason: never an exception."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from pydantic import ValidationError

from harness_base.arg_templates import TemplateError, template_render
from harness_base.config import HttpCompensation, harness_config
from tasks.models import Task, ToolCall, ToolCallStatus
from tasks.selectors.calls import task_tool
from tasks.signals import compensation_pauses
from tasks.tools.mcp import mcp_name, mcp_server_of
from tasks.tools.registry import ToolSpec

HTTP_TOOL = "http_request"
MAX_WHY_CHARS = 500

# The ledger says the call may or may not have taken effect: never compensated blind.
UNKNOWN = (ToolCallStatus.RUNNING, ToolCallStatus.UNKNOWN_OUTCOME, ToolCallStatus.TIMED_OUT)
# The tool reported that the call failed (and a call waiting for its retry failed so far):
# there is nothing to undo, unless one of its attempts ended without an answer.
FAILED = (ToolCallStatus.FAILED, ToolCallStatus.RETRY_WAIT)

WHY_DECLARED = "declared irreversible: what it did cannot be undone"
WHY_NONE = "no compensation declared: {outside}, and a rollback cannot undo it"


@dataclass(frozen=True)
class PlannedCompensation:
    """The call that undoes `call` (the original ledger row): `tool` with `arguments`.
    `review`: the review policy will pause it. `outcome_unknown`: whether `call` took effect
    is unknown, so a person decides first (the unknown-outcome review); its `arguments` are
    then None when they need the result it never returned (`unresolved` says so)."""

    call: ToolCall
    tool: str
    arguments: dict[str, Any] | None
    review: bool
    outcome_unknown: bool = False
    unresolved: str = ""

    @property
    def call_id(self) -> str:
        return self.call.call_id


@dataclass(frozen=True)
class Irreversible:
    """`call` (the original ledger row) has an effect outside the workspace that a rollback
    cannot undo, and `why`."""

    call: ToolCall
    why: str

    @property
    def call_id(self) -> str:
        return self.call.call_id

    @property
    def tool(self) -> str:
        return self.call.tool


class _Uncomputable(Exception):
    """The compensation's arguments cannot be computed: the message says why."""


def _outcome_unknown(call: ToolCall) -> bool:
    if call.status in UNKNOWN:
        return True
    return any(
        isinstance(entry, dict) and entry.get("status") in UNKNOWN for entry in call.attempt_log
    )


def effects_outside(tool: ToolSpec, arguments: dict[str, Any]) -> str:
    """Why a call of `tool` may have changed something outside its workspace ("" when it
    cannot: the snapshot restores all it did)."""
    if not tool.side_effect:
        return ""
    if tool.effects_outside is not None:
        return tool.effects_outside(arguments)
    if tool.server:
        if (tool.annotations or {}).get("openWorldHint", True) is not False:
            return f"MCP server {tool.server!r} acts outside the workspace"
        return ""
    if tool.risk == "external":
        return "it acts outside the workspace"
    if not tool.idempotent and tool.risk not in ("write", "destructive"):
        return "its effects are not confined to the workspace"
    return ""


def compensation_for(call: ToolCall, *, task: Task) -> PlannedCompensation | Irreversible | None:
    """How a rollback undoes `call` (a ledger row of `task` the rollback undoes): the
    compensating call, why it cannot be undone, or None when there is nothing to undo (no
    effect outside the workspace, or the call never took effect)."""
    unknown = _outcome_unknown(call)
    if call.status in FAILED and not unknown:
        return None
    if call.status not in (ToolCallStatus.SUCCEEDED, *UNKNOWN, *FAILED):
        return None
    tool = task_tool(task_id=task.id, name=call.tool)
    declared = _declared(call, tool)
    if declared is None:
        if tool is None:
            return Irreversible(
                call,
                f"the tool {call.tool!r} is not known here: what it did cannot be told or undone",
            )
        if not tool.reversible:
            return Irreversible(call, WHY_DECLARED)
        outside = effects_outside(tool, dict(call.arguments or {}))
        return Irreversible(call, WHY_NONE.format(outside=outside)) if outside else None
    name, compute = declared
    try:
        arguments = _checked(task, name, compute())
    except _Uncomputable as exc:
        if unknown and call.result is None:
            why = f"the call's result is unknown, and the arguments need it ({exc})"
            return PlannedCompensation(
                call, name, None, review=True, outcome_unknown=True, unresolved=why[:MAX_WHY_CHARS]
            )
        return Irreversible(call, f"compensation could not be computed: {exc}"[:MAX_WHY_CHARS])
    review = compensation_pauses(
        task=task, call=call, tool=task_tool(task_id=task.id, name=name), arguments=arguments
    )
    return PlannedCompensation(call, name, arguments, review=review, outcome_unknown=unknown)


def _declared(call: ToolCall, tool: ToolSpec | None) -> tuple[str, Any] | None:
    """(compensating tool, a function computing its arguments) if a compensation is declared
    for the call's tool: by the tool, by its MCP server's configuration, by `http`."""
    arguments, result = dict(call.arguments or {}), call.result
    if tool is not None and tool.compensate is not None:
        compensate = tool.compensate

        def by_tool() -> Any:
            try:
                return compensate.args(arguments, result)
            except Exception as exc:  # the operator's function: any failure is a reason
                raise _Uncomputable(
                    f"{compensate.tool} arguments: {type(exc).__name__}: {str(exc)[:300]}"
                ) from None

        return compensate.tool, by_tool
    server = mcp_server_of(call.tool)
    if server is not None:
        config = harness_config().mcp_servers.get(server)
        mapping = config.compensations.get(call.tool.partition("__")[2]) if config else None
        if mapping is None:
            return None
        return mcp_name(server, mapping.tool), lambda: _render(
            mapping.args, arguments=arguments, result=result
        )
    if call.tool == HTTP_TOOL:
        found = _http_compensation(arguments)
        if found is not None:
            return HTTP_TOOL, lambda: _http_arguments(found, arguments=arguments, result=result)
    return None


def _render(template: Any, *, arguments: dict[str, Any], result: Any, escape: Any = None) -> Any:
    try:
        return template_render(
            template, values={"args": arguments, "result": result}, escape=escape
        )
    except TemplateError as exc:
        raise _Uncomputable(str(exc)) from None


def _http_compensation(arguments: dict[str, Any]) -> HttpCompensation | None:
    method, url = str(arguments.get("method") or "GET"), str(arguments.get("url") or "")
    for item in harness_config().http.compensations:
        if item.match.matches(method=method, url=url):
            return item
    return None


def _http_arguments(
    found: HttpCompensation, *, arguments: dict[str, Any], result: Any
) -> dict[str, Any]:
    """The compensating `http_request` arguments. `result.json` is the original response's
    body parsed as JSON (when it is JSON); values in the URL are escaped as a path segment."""
    if isinstance(result, dict):
        try:
            result = {**result, "json": json.loads(str(result.get("body") or ""))}
        except ValueError:
            pass
    request = found.request
    out: dict[str, Any] = {
        "method": request.method,
        "url": _render(
            request.url,
            arguments=arguments,
            result=result,
            escape=lambda text: quote(text, safe=""),
        ),
    }
    if request.headers:
        out["headers"] = _render(request.headers, arguments=arguments, result=result)
    if request.json_body is not None:
        body = _render(request.json_body, arguments=arguments, result=result)
        out["body"] = json.dumps(body, ensure_ascii=False)
        out.setdefault("headers", {}).setdefault("Content-Type", "application/json")
    return out


def _checked(task: Task, name: str, arguments: Any) -> dict[str, Any]:
    """The arguments, if the compensating tool (as this task knows it) accepts them."""
    if not isinstance(arguments, dict):
        raise _Uncomputable(f"{name} arguments: expected an object, got {type(arguments).__name__}")
    try:
        arguments = json.loads(json.dumps(arguments, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise _Uncomputable(f"{name} arguments are not JSON: {exc}") from None
    tool = task_tool(task_id=task.id, name=name)
    if tool is None and mcp_server_of(name) is None:
        raise _Uncomputable(f"the compensating tool {name!r} is not registered")
    if tool is not None:
        try:
            tool.args_model.model_validate(arguments)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first.get("loc", ())) or "arguments"
            raise _Uncomputable(f"{name} refuses the arguments: {where}: {first['msg']}") from None
    checked: dict[str, Any] = arguments
    return checked
