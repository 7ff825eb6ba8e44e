"""The shape of the code, checked on its source (docs/architecture.md, issue 13).

1. Three state machines — Task, ToolCall and ReviewRequest — each have one transition function
   that is the only writer of their status and of the fields derived from it. No other module
   assigns `.status = …`, passes `status=` to `.update()` / `.create()` / a model constructor,
   or writes a derived field (`error_fingerprint`, `review_wait_s`, `held_wait_s`,
   `decided_at`).
2. An app writes only its own models: a module never calls a write (`create`, `update`,
   `delete`, …) on the manager of a model it imports from another app's `models`, beyond the
   few cross-app writes listed in KNOWN_CROSS_APP_WRITES (none of them into a layer above).

The scan reads every module of the project except migrations, tests and benchmarks, with `ast`.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
APPS = ("tasks", "review", "checkpoints", "multiagent", "agent", "dashboard", "harness_site")
# bench/ fabricates task states to measure them, as tests do: it is not scanned.
SCANNED = (*APPS, "examples")

# The state machines' enumerations. A status write whose value names another enumeration
# (a global checkpoint round's RoundStatus, say) belongs to another model and is not checked.
GOVERNED_ENUMS = {"TaskStatus", "ToolCallStatus", "ReviewStatus"}
# Fields only a transition function sets (besides `status`).
DERIVED = {"error_fingerprint", "review_wait_s", "held_wait_s", "decided_at"}
GOVERNED_MODELS = {"Task", "ToolCall", "ReviewRequest"}

# (module, function) -> what it may write. Creation with the initial status happens only in
# the owning service (review_request_open creates a pending review; task_create and the loop
# create rows with the model's default status and no `status` argument).
OWNERS = {
    ("tasks/services.py", "task_transition"),
    ("tasks/services.py", "task_acquire"),
    ("tasks/services.py", "toolcall_transition"),
    ("review/services.py", "review_transition"),
}

WRITE_METHODS = {
    "create",
    "update",
    "delete",
    "bulk_create",
    "bulk_update",
    "get_or_create",
    "update_or_create",
}

# Writes of another app's models that remain (module, model). Each is a known debt of issue
# 13's "each app writes only its own models"; none goes into a layer above the writer, and
# none writes a status or a derived field (rule 1 checks those everywhere).
KNOWN_CROSS_APP_WRITES = {
    ("agent/sweep.py", "SweepRun"),  # the sweep's own bookkeeping row, a core model
    ("harness_site/api_auth.py", "ApiToken"),  # last_used_at
    ("multiagent/recovery.py", "Checkpoint"),  # supersedes checkpoints after a group rollback
    ("checkpoints/recovery.py", "Task"),  # head checkpoint and usage after a fork
    ("checkpoints/retention.py", "Task"),
    ("multiagent/recovery.py", "Task"),  # head checkpoint and usage after a group rollback
    ("multiagent/coordinator.py", "Task"),  # hold_round_id
    ("multiagent/delegation.py", "Task"),
    ("agent/runtime/watchdog.py", "Task"),  # the heartbeat (lease-fenced)
    ("agent/graph_runner.py", "Task"),
}


def modules() -> Iterator[tuple[str, ast.Module]]:
    for package in SCANNED:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if "/migrations/" in rel or "/tests/" in rel or path.name.startswith("test_"):
                continue
            yield rel, ast.parse(path.read_text(), filename=rel)


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} | {
        n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)
    }


def _other_enum(value: ast.AST) -> bool:
    """The value names a status enumeration of a model no state machine here governs."""
    names = _names(value)
    return not (names & GOVERNED_ENUMS) and any(
        n.endswith("Status") and n[:1].isupper() for n in names
    )


def _is_self(node: ast.AST) -> bool:
    return isinstance(node, ast.Name) and node.id == "self"


class _Scan(ast.NodeVisitor):
    def __init__(self, rel: str) -> None:
        self.rel = rel
        self.function: list[str] = []
        self.found: list[str] = []

    def _where(self, node: ast.AST) -> str:
        return f"{self.rel}:{node.lineno} in {'.'.join(self.function) or '<module>'}"

    def _owned(self) -> bool:
        return any((self.rel, f) in OWNERS for f in self.function)

    def _flag(self, node: ast.AST, what: str) -> None:
        if not self._owned():
            self.found.append(f"{self._where(node)}: {what}")

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self.function.append(node.name)
        self.generic_visit(node)
        self.function.pop()

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def _target(self, target: ast.AST, value: ast.AST | None) -> None:
        if not isinstance(target, ast.Attribute) or _is_self(target.value):
            return
        if target.attr == "status" and not (value is not None and _other_enum(value)):
            self._flag(target, f"assigns .status = {ast.unparse(value) if value else '…'}")
        elif target.attr in DERIVED:
            self._flag(target, f"assigns .{target.attr}")

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            for t in target.elts if isinstance(target, ast.Tuple) else [target]:
                self._target(t, node.value)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._target(node.target, node.value)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._target(node.target, node.value)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        method = func.attr if isinstance(func, ast.Attribute) else None
        constructor = isinstance(func, ast.Name) and func.id in GOVERNED_MODELS
        if method in WRITE_METHODS or constructor:
            for kw in node.keywords:
                if kw.arg == "status" and not _other_enum(kw.value):
                    called = method or func.id  # type: ignore[union-attr]
                    self._flag(node, f"{called}(status={ast.unparse(kw.value)})")
                elif kw.arg in DERIVED:
                    self._flag(node, f"{method or func.id}({kw.arg}=…)")  # type: ignore[union-attr]
        if isinstance(func, ast.Name) and func.id == "setattr" and len(node.args) >= 2:
            key = node.args[1]
            if isinstance(key, ast.Constant) and key.value in {"status", *DERIVED}:
                self._flag(node, f"setattr(…, {key.value!r})")
        self.generic_visit(node)


def test_only_the_transition_functions_write_status() -> None:
    found = []
    for rel, tree in modules():
        scan = _Scan(rel)
        scan.visit(tree)
        found += scan.found
    assert not found, "status written outside its transition function:\n" + "\n".join(found)


def test_the_owning_functions_exist() -> None:
    """The allowed writers are real functions (a rename must update OWNERS, not empty it)."""
    defined = set()
    for rel, tree in modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef):
                defined.add((rel, node.name))
    assert OWNERS <= defined, OWNERS - defined


def _app_of(rel: str) -> str:
    return rel.split("/", 1)[0]


def _foreign_models(tree: ast.Module, app: str) -> dict[str, str]:
    """Model names this module imports from another app's models module -> that app."""
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.endswith(".models"):
            owner = node.module.split(".", 1)[0]
            if owner != app and owner in APPS:
                for alias in node.names:
                    if alias.name[:1].isupper() and not alias.name.endswith(("Status", "Choices")):
                        out[alias.asname or alias.name] = owner
    return out


def _manager_model(node: ast.AST) -> str | None:
    """`Model` of a call chain `Model.objects.<…>.<write>()`."""
    while isinstance(node, ast.Call | ast.Attribute):
        if isinstance(node, ast.Call):
            node = node.func
            continue
        if node.attr == "objects" and isinstance(node.value, ast.Name):
            return node.value.id
        node = node.value
    return None


def cross_app_writes() -> set[tuple[str, str]]:
    writes = set()
    for rel, tree in modules():
        app = _app_of(rel)
        if app not in APPS:
            continue
        foreign = _foreign_models(tree, app)
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in WRITE_METHODS
            ):
                model = _manager_model(node.func.value)
                if model in foreign:
                    writes.add((rel, model))
    return writes


def test_apps_write_only_their_own_models() -> None:
    writes = cross_app_writes()
    unexpected = writes - KNOWN_CROSS_APP_WRITES
    assert not unexpected, f"a module writes another app's model: {sorted(unexpected)}"


def test_the_core_writes_no_model_of_an_app_above_it() -> None:
    """tasks (the core) never writes review, checkpoints or multiagent models."""
    writes = {(rel, model) for rel, model in cross_app_writes() if rel.startswith("tasks/")}
    assert not writes, sorted(writes)


# The functions that write task events, and the argument that names the type.
EVENT_WRITERS = {"event_build", "event_record", "event", "timeout_event"}


def test_every_event_type_is_one_of_the_enumeration() -> None:
    """Event writers name their type as `EventType.X` (tasks.events), never a bare string,
    and every member of the enumeration is documented in docs/architecture.md."""
    from tasks.events import EventType

    bare = []
    for rel, tree in modules():
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name not in EVENT_WRITERS or name == "timeout_event":
                continue
            kind = next((kw.value for kw in node.keywords if kw.arg == "type"), None)
            if kind is None and name == "event" and node.args:
                kind = node.args[0]
            if isinstance(kind, ast.Constant):
                bare.append(f"{rel}:{node.lineno}: {name}({kind.value!r})")
            elif isinstance(kind, ast.Attribute) and isinstance(kind.value, ast.Name):
                if kind.value.id == "EventType" and kind.attr not in EventType.__members__:
                    bare.append(f"{rel}:{node.lineno}: EventType.{kind.attr} does not exist")
    assert not bare, "event types not from tasks.events.EventType:\n" + "\n".join(bare)
    docs = (ROOT / "docs" / "architecture.md").read_text()
    undocumented = [t.value for t in EventType if f"`{t.value}`" not in docs]
    assert not undocumented, f"event types missing from docs/architecture.md: {undocumented}"
