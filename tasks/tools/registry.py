"""The tool registry. A tool is a function taking (ToolContext, a pydantic argument model) and
returning a JSON-able result; its risk, side-effect and idempotency flags and its timeout are
declared with the `@tool` decorator. Teams register their own tools the same way, from modules
named in `HARNESS_TOOL_MODULES`, without touching harness code:

    from pydantic import BaseModel
    from tasks.tools import tool, ToolContext

    class TicketArgs(BaseModel):
        title: str

    @tool(risk="external", side_effect=True, idempotent=True, timeout_s=20,
          retry={"max_attempts": 3, "initial_s": 2})
    def create_ticket(ctx: ToolContext, args: TicketArgs) -> dict:
        '''Open a ticket in the tracker.'''
        return tracker.create(args.title, idempotency_key=ctx.call_id)
"""

from __future__ import annotations

import importlib
import inspect
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_type_hints

from django.conf import settings
from pydantic import BaseModel

from tasks.errors import PermanentToolError, ToolError, TransientToolError
from tasks.outputs import CallOutput
from tasks.spec import RetrySpec
from tasks.tools.compensate import Compensate

__all__ = [
    "Compensate",
    "PermanentToolError",
    "ToolContext",
    "ToolError",
    "ToolSpec",
    "TransientToolError",
    "UnknownTool",
    "registry",
    "tool",
]

# `execute` runs a program (run_command): reviewed unless an explicit allow rule names it.
Risk = Literal["read", "write", "execute", "external", "destructive"]
RecoveryStrategy = Literal["rollback", "retry", "forward"]

_DEFAULT_STRATEGY: dict[str, RecoveryStrategy] = {
    "read": "retry",
    "write": "rollback",
    "execute": "rollback",
    "destructive": "rollback",
    "external": "retry",
}


@dataclass
class ToolContext:
    """What a running tool may know about: its workspace, its idempotency key and deadline."""

    task_id: str
    call_id: str
    workspace: Path
    timeout_s: float
    # Set by the harness when the call must stop (cancel, lease lost, timeout).
    stop: threading.Event = field(default_factory=threading.Event)
    # Relative paths of the workspace files the call changed, as a tool that
    # `reports_changes` records them (record_change) before it touches them.
    changed: set[str] = field(default_factory=set)
    # The group's shared directory (TaskSpec `shared` on the root task), or None: the file
    # tools reach it as `/shared/...` (tasks.paths.SHARED_MOUNT), commands at /shared.
    shared: Path | None = None
    # What the call produces for people (tasks.outputs): a command's streams as they arrive,
    # a file tool's diff, an MCP server's content blocks. Shown on the task page, stored
    # bounded with the outcome; the model reads the result.
    output: CallOutput = field(default_factory=CallOutput)
    # Images a tool returns for the model to see (tasks.agent_state.MediaPart), joined to its
    # result message: a model adapter that takes images sends them in its native form.
    media: list[Any] = field(default_factory=list)

    @property
    def idempotency_key(self) -> str:
        return f"{self.task_id}:{self.call_id}"

    def record_change(self, target: Path) -> None:
        """Note that the file at `target` (inside the workspace) is about to change."""
        self.changed.add(target.relative_to(self.workspace).as_posix())


@dataclass(frozen=True)
class ToolSpec:
    name: str
    func: Callable[[ToolContext, Any], Any]
    args_model: type[BaseModel]
    description: str
    risk: Risk
    side_effect: bool
    idempotent: bool
    timeout_s: float
    recovery: RecoveryStrategy
    test_only: bool = False
    preview: Callable[[ToolContext, Any], str] | None = None
    # The state of what the call acts on beyond its arguments, as targets (tasks.fingerprint):
    # recorded when its review opens, compared before the approved call runs. None: the paths
    # its arguments name.
    fingerprint: Callable[[ToolContext, Any], list[dict[str, Any]]] | None = None
    # From a pydantic return annotation: every result is checked against it (required fields).
    result_model: type[BaseModel] | None = None
    # Overrides of harness.yaml `retry` for this tool (a task's own `retry` overrides these).
    retry: RetrySpec | None = None
    # Set for a tool of an MCP server (tasks/tools/mcp/): the server's name, the tool's
    # `inputSchema` (its argument schema) and its annotations as the server declared them.
    server: str = ""
    input_schema: dict[str, Any] | None = None
    annotations: dict[str, Any] | None = None
    # True: every workspace file the tool changes goes through ctx.record_change (a tool that
    # changes none records nothing), so the next snapshot scans only those files' folders.
    # False (commands, user tools): the next snapshot surveys the whole workspace.
    reports_changes: bool = False
    # How a rollback undoes a call of this tool (tasks.tools.compensate): the compensating
    # tool and its arguments derived from the call's arguments and result.
    compensate: Compensate | None = None
    # False: a call cannot be undone (an email sent); a rollback lists it as such.
    reversible: bool = True
    # For a tool with side effects that, per call, may stay inside the workspace (the
    # snapshot then restores everything they did): why this call's effects may reach beyond
    # it, or "" when they cannot (run_command without network, in the sandbox).
    effects_outside: Callable[[dict[str, Any]], str] | None = None

    def json_schema(self) -> dict[str, Any]:
        if self.input_schema is not None:
            return self.input_schema
        return self.args_model.model_json_schema()


class UnknownTool(KeyError):
    pass


class ToolRegistry:
    def __init__(self) -> None:
        self._tools: dict[str, ToolSpec] = {}
        self._lock = threading.Lock()

    def register(self, spec: ToolSpec) -> ToolSpec:
        with self._lock:
            existing = self._tools.get(spec.name)
            if existing is not None and existing.func is not spec.func:
                raise ValueError(f"a tool named {spec.name!r} is already registered")
            self._tools[spec.name] = spec
        return spec

    def get(self, name: str) -> ToolSpec:
        load_tool_modules()
        spec = self._tools.get(name)
        if spec is None or (spec.test_only and not _test_tools_enabled()):
            raise UnknownTool(name)
        return spec

    def names(self) -> list[str]:
        load_tool_modules()
        enabled = _test_tools_enabled()
        return sorted(n for n, s in self._tools.items() if enabled or not s.test_only)


registry = ToolRegistry()


def _test_tools_enabled() -> bool:
    return bool(settings.HARNESS_ENABLE_TEST_TOOLS)


def tool(
    *,
    name: str | None = None,
    risk: Risk = "read",
    side_effect: bool = False,
    idempotent: bool = True,
    timeout_s: float = 30.0,
    recovery: RecoveryStrategy | None = None,
    test_only: bool = False,
    preview: Callable[[ToolContext, Any], str] | None = None,
    fingerprint: Callable[[ToolContext, Any], list[dict[str, Any]]] | None = None,
    retry: RetrySpec | dict[str, Any] | None = None,
    reports_changes: bool = False,
    compensate: Compensate | None = None,
    reversible: bool = True,
    effects_outside: Callable[[dict[str, Any]], str] | None = None,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register `func(ctx, args)` as a tool. The argument model is read from the type hint of
    the second parameter (a pydantic return annotation, if any, is the result model every
    result is checked against); the docstring becomes the description the model sees.
    `compensate` names how a rollback undoes a call, `reversible=False` that it cannot."""
    if compensate is not None and not reversible:
        raise TypeError("a tool is either reversible=False or has a compensate=, not both")
    if compensate is not None and not isinstance(compensate, Compensate):
        raise TypeError("compensate= takes a tasks.tools.Compensate(tool, args)")

    def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
        params = list(inspect.signature(func).parameters)
        if len(params) != 2:
            raise TypeError(f"tool {func.__name__}: expected (ctx: ToolContext, args: Model)")
        hints = get_type_hints(func)
        args_model = hints.get(params[1])
        if not (inspect.isclass(args_model) and issubclass(args_model, BaseModel)):
            raise TypeError(f"tool {func.__name__}: the args parameter must be a pydantic model")
        returns = hints.get("return")
        result_model = (
            returns if inspect.isclass(returns) and issubclass(returns, BaseModel) else None
        )
        registry.register(
            ToolSpec(
                name=name or func.__name__,
                func=func,
                args_model=args_model,
                description=inspect.cleandoc(func.__doc__ or "").strip(),
                risk=risk,
                side_effect=side_effect,
                idempotent=idempotent,
                timeout_s=timeout_s,
                recovery=recovery or _DEFAULT_STRATEGY[risk],
                test_only=test_only,
                preview=preview,
                fingerprint=fingerprint,
                result_model=result_model,
                retry=RetrySpec.model_validate(retry) if isinstance(retry, dict) else retry,
                reports_changes=reports_changes,
                compensate=compensate,
                reversible=reversible,
                effects_outside=effects_outside,
            )
        )
        return func

    return decorate


_imported: set[str] = set()
_load_lock = threading.Lock()


def load_tool_modules() -> None:
    """Import the built-in tools, the test tools and every module in HARNESS_TOOL_MODULES
    (each once; a module added to the setting later is picked up on the next lookup)."""
    wanted = [
        "agent.tools.builtin",
        "agent.tools.testing",
        "multiagent.tools",
        *settings.HARNESS_TOOL_MODULES,
    ]
    if _imported.issuperset(wanted):
        return
    with _load_lock:
        for module in wanted:
            if module not in _imported:
                importlib.import_module(module)
                _imported.add(module)
