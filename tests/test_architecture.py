"""The shape of the code, checked on its source (docs/architecture.md, issue 13).

1. Three state machines — Task, ToolCall and ReviewRequest — each have one transition function
   that is the only writer of their status and of the fields derived from it. No other module
   assigns `.status = …`, passes `status=` to `.update()` / `.create()` / a model constructor,
   or writes a derived field (`error_fingerprint`, `review_wait_s`, `held_wait_s`,
   `decided_at`, `calls_failed`).
2. An app writes only its own models: a module never writes (`create`, `update`, `delete`,
   `save`, …) a row or queryset of a model of another app, whether through its manager, a
   name bound to it, a relation or a row another app's function built. It calls a service of
   the app that owns the model instead.

The scan reads every module of the project except migrations, tests and benchmarks, with `ast`.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
APPS = (
    "tasks",
    "review",
    "checkpoints",
    "multiagent",
    "agent",
    "dashboard",
    "harness_site",
    "accounts",
    "cases",
)
# bench/ fabricates task states to measure them, as tests do: it is not scanned.
SCANNED = (*APPS, "examples")

# The state machines' enumerations. A status write whose value names another enumeration
# (a global checkpoint round's RoundStatus, say) belongs to another model and is not checked.
GOVERNED_ENUMS = {"TaskStatus", "ToolCallStatus", "ReviewStatus"}
# Fields only a transition function sets (besides `status`).
DERIVED = {"error_fingerprint", "review_wait_s", "held_wait_s", "decided_at", "calls_failed"}
GOVERNED_MODELS = {"Task", "ToolCall", "ReviewRequest"}

# (module, function) -> what it may write. Creation with the initial status happens only in
# the owning service (review_request_open creates a pending review; task_create and the loop
# create rows with the model's default status and no `status` argument).
OWNERS = {
    ("tasks/services/task_transitions.py", "task_transition"),
    ("tasks/services/acquire.py", "task_acquire"),
    ("tasks/services/toolcall_transitions.py", "toolcall_transition"),
    ("review/services/transitions.py", "review_transition"),
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


# A model, as a write's receiver: (its name, the app that owns it). A row another app's
# function returned has no name here (it is that function's): ("event_build()", "tasks").
Model = tuple[str, str]


def _is_models(module: str) -> bool:
    """A model module: an app's `models` (a module or a package) or a module of that package."""
    return module.endswith(".models") or ".models." in module


def _imports(tree: ast.Module, rel: str) -> tuple[dict[str, Model], dict[str, str]]:
    """-> (models by the name this module knows them under, the names it imported from
    another app's modules other than `models` -> that app: functions and module aliases)."""
    app = _app_of(rel)
    models: dict[str, Model] = {}
    others: dict[str, str] = {}
    if _is_models(rel.removesuffix(".py").removesuffix("/__init__").replace("/", ".")):
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                models[node.name] = (node.name, app)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            owner = node.module.split(".", 1)[0]
            if owner not in APPS:
                continue
            for alias in node.names:
                name = alias.asname or alias.name
                if _is_models(node.module):
                    if alias.name[:1].isupper() and not alias.name.endswith(("Status", "Choices")):
                        models[name] = (alias.name, owner)
                elif owner != app:
                    others[name] = owner
        elif isinstance(node, ast.Import):
            for alias in node.names:
                owner = alias.name.split(".", 1)[0]
                if owner in APPS and owner != app and alias.asname:
                    others[alias.asname] = owner
    return models, others


def _related(model: Model, attr: str) -> Model | None | bool:
    """What `attr` of a `model` row (or queryset) is: the model of a relation (a foreign key's
    row, a reverse or many-to-many manager), None for another field, True for anything else
    (a method, e.g. a queryset's `filter`, which keeps the model)."""
    from django.apps import apps
    from django.core.exceptions import FieldDoesNotExist

    name, owner = model
    try:
        cls = apps.get_model(owner, name)
    except LookupError:
        return True  # another app's function returned it: its model is not known here
    try:
        field = cls._meta.get_field(attr)
    except FieldDoesNotExist:
        return True
    related = field.related_model
    if related is None or isinstance(related, str):
        return None
    return related.__name__, related._meta.app_label


class _Writes(ast.NodeVisitor):
    """The model writes of one module, with the model each writes: a manager's chain
    (`Model.objects.filter(…).update(…)`), a row or queryset bound to a name (`row =
    Model(…)`, `rows = Model.objects.filter(…)`, `for row in Model.objects…`, a parameter or
    variable annotated `row: Model`) and then written (`row.save()`, `rows.delete()`), a
    relation of such a row (`task.events.create(…)`, `checkpoint.task.save()`) and a row
    another app's function returned (`event = event_build(…)`; `event.save()`)."""

    def __init__(self, rel: str, tree: ast.Module) -> None:
        self.rel = rel
        self.models, self.others = _imports(tree, rel)
        self.scopes: list[dict[str, Model]] = [{}]
        self.writes: list[tuple[int, str, Model]] = []

    def _bound(self, name: str) -> Model | None:
        return next((s[name] for s in reversed(self.scopes) if name in s), None)

    def _annotation(self, node: ast.AST | None) -> Model | None:
        names = _names(node) if node is not None else set()
        return next((self.models[n] for n in sorted(names) if n in self.models), None)

    def model_of(self, node: ast.AST) -> Model | None:
        """The model of the rows (or queryset) an expression stands for, if known."""
        if isinstance(node, ast.Name):
            return self._bound(node.id)
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name):
                if func.id in self.models:
                    return self.models[func.id]  # a constructor
                if func.id in self.others:
                    return (f"{func.id}()", self.others[func.id])
                return None
            if isinstance(func, ast.Attribute):
                if isinstance(func.value, ast.Name) and func.value.id in self.others:
                    return (f"{func.value.id}.{func.attr}()", self.others[func.value.id])
                return self.model_of(func)
            return None
        if isinstance(node, ast.Attribute):
            if node.attr == "objects" and isinstance(node.value, ast.Name):
                return self.models.get(node.value.id)
            model = self.model_of(node.value)
            if model is None:
                return None
            related = _related(model, node.attr)
            return model if related is True else related or None
        return None

    def _bind(self, target: ast.AST, model: Model | None) -> None:
        if isinstance(target, ast.Name):
            if model is None:
                self.scopes[-1].pop(target.id, None)
            else:
                self.scopes[-1][target.id] = model

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        scope: dict[str, Model] = {}
        for arg in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]:
            model = self._annotation(arg.annotation)
            if model is not None:
                scope[arg.arg] = model
        self.scopes.append(scope)
        self.generic_visit(node)
        self.scopes.pop()

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_Assign(self, node: ast.Assign) -> None:
        self.generic_visit(node)
        model = self.model_of(node.value)
        for target in node.targets:
            self._bind(target, model)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self.generic_visit(node)
        model = self._annotation(node.annotation)
        if model is None and node.value is not None:
            model = self.model_of(node.value)
        self._bind(node.target, model)

    def visit_For(self, node: ast.For) -> None:
        self._bind(node.target, self.model_of(node.iter))
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in {*WRITE_METHODS, "save"}:
            model = self.model_of(func.value)
            if model is not None:
                self.writes.append((node.lineno, func.attr, model))
        self.generic_visit(node)


def cross_app_writes() -> list[str]:
    """Every write of another app's model: `module:line: Model.method`."""
    found = []
    for rel, tree in modules():
        app = _app_of(rel)
        if app not in APPS:
            continue
        scan = _Writes(rel, tree)
        scan.visit(tree)
        for line, method, (model, owner) in scan.writes:
            if owner != app:
                found.append(f"{rel}:{line}: {model}.{method} ({owner})")
    return found


def test_apps_write_only_their_own_models() -> None:
    """Each app writes only its own models: a write of another app's row is a call to a
    service of the app that owns it (docs/architecture.md)."""
    found = cross_app_writes()
    assert not found, "a module writes another app's model:\n" + "\n".join(found)


def test_the_write_scan_sees_every_form() -> None:
    """The scan finds the write forms the code could use, so an empty answer means none."""
    source = """
from tasks.models import Task, TaskEvent
from tasks import services
from tasks.services import event_build

def f(task: Task, rows):
    Task.objects.filter(id=1).update(cancel_requested=True)
    queued = Task.objects.filter(status="queued")
    queued.delete()
    row = Task.objects.get(id=1)
    row.save(update_fields=["retry_at"])
    task.events.create(type="x")
    TaskEvent(task_id=1).save()
    event = event_build(task_id=1, type="x")
    event.save(force_insert=True)
    services.event_build(task_id=1, type="x").save()
    for child in Task.objects.filter(parent_id=1):
        child.delete()
    rows.update(a=1)  # unknown: not counted
"""
    scan = _Writes("checkpoints/example.py", ast.parse(source))
    scan.visit(ast.parse(source))
    assert [(line, method, model) for line, method, (model, _) in scan.writes] == [
        (7, "update", "Task"),
        (9, "delete", "Task"),
        (11, "save", "Task"),
        (12, "create", "TaskEvent"),
        (13, "save", "TaskEvent"),
        (15, "save", "event_build()"),
        (16, "save", "services.event_build()"),
        (18, "delete", "Task"),
    ]


def test_the_write_scan_knows_a_models_package() -> None:
    """A module of an app's `models` package defines that app's models, and a model imported
    from such a module (`from tasks.models.task import Task`) is known as from `tasks.models`."""
    source = """
from tasks.models.task import Task

class Note(models.Model):
    pass

def f():
    Task.objects.filter(id=1).update(cancel_requested=True)
    Note.objects.create()
"""
    scan = _Writes("checkpoints/models/notes.py", ast.parse(source))
    scan.visit(ast.parse(source))
    assert scan.writes == [
        (8, "update", ("Task", "tasks")),
        (9, "create", ("Note", "checkpoints")),
    ]


def test_the_core_writes_no_model_of_an_app_above_it() -> None:
    """tasks (the core) never writes review, checkpoints or multiagent models."""
    writes = [w for w in cross_app_writes() if w.startswith("tasks/")]
    assert not writes, writes


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
