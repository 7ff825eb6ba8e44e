"""The New task page's form (issue #45 item 3): what a person fills in, as the TaskSpec dict
that `POST /api/v1/tasks` takes, and a spec (a template's) as the form shows it. Validating
and creating stay with TaskSpec and task_create, as for the API; this module translates, and
places each error beside the input of the field the API names.

What the form has no input for (checks, review overrides, retry, context, sub-agents, a
replayed model, an endpoint's key variable, ...) is kept as JSON in "Other spec sections",
so a template starts again with all of its spec."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from django.http import QueryDict
from django.utils.datastructures import MultiValueDict

from dashboard.new_task_files import FileRow, files_as_spec, files_read

LOOP = "loop"
# In the agent or model choice: the spec's own `agent` / `model`, kept in "other".
OTHER = "other"
AGENT_KINDS = ("langgraph", "openai-agents", "pydantic-ai")
MODEL_KINDS = ("openai", "scripted")
BUDGET_FIELDS = ("max_steps", "max_tokens", "session_timeout_s", "turn_timeout_s", "tool_timeout_s")
TEXT_FIELDS = (
    "title",
    "goal",
    "priority",
    "agent",
    "agent_input",
    "model_kind",
    "model_name",
    "model_base_url",
    "model_script",
    "upload_folder",
    "other",
    "template_name",
    # More tool names, comma-separated: an MCP server's (`server__tool`), known when it starts.
    "tools_more",
    # "on": the spec's `"mode": "plan"` (a dry run and one review first: docs/plans.md).
    "plan_mode",
    *(f"budget_{name}" for name in BUDGET_FIELDS),
)
# The spec field (as the API names it, union tags dropped) -> the input it is shown beside;
# the first prefix that matches wins.
PLACES = (
    ("title", "title"),
    ("goal", "goal"),
    ("priority", "priority"),
    ("mode", "plan_mode"),
    ("model.script", "model_script"),
    ("model.model", "model_name"),
    ("model.base_url", "model_base_url"),
    ("model", "model_kind"),
    ("agent.input", "agent_input"),
    ("agent.model.base_url", "model_base_url"),
    ("agent.model", "model_name"),
    ("agent", "agent"),
    ("tools", "tools"),
    *((f"budget.{name}", f"budget_{name}") for name in BUDGET_FIELDS),
    ("workspace", "files"),
    ("other", "other"),
    ("template_name", "template_name"),
)
_UNION_TAGS = {"scripted", "openai", "replay", *AGENT_KINDS}


@dataclass
class NewTaskForm:
    values: dict[str, str] = field(default_factory=dict)
    tools: list[str] = field(default_factory=list)
    files: list[FileRow] = field(default_factory=list)
    errors: list[dict[str, str]] = field(default_factory=list)

    def errors_by_place(self) -> dict[str, list[str]]:
        placed: dict[str, list[str]] = {}
        for error in self.errors:
            place = error_place(error["field"])
            placed.setdefault(place, []).append(f"{error['field']}: {error['message']}")
        return placed


def error_place(name: str) -> str:
    """The input beside which an error of spec field `name` is shown ("general": at the top)."""
    parts = name.split(".")
    kept = [
        p
        for i, p in enumerate(parts)
        if not (i and parts[i - 1] in ("model", "agent") and p in _UNION_TAGS)
    ]
    normalized = ".".join(kept)
    for prefix, place in PLACES:
        if normalized == prefix or normalized.startswith(prefix + "."):
            return place
    return "general"


def form_from_post(post: QueryDict, files: MultiValueDict) -> NewTaskForm:
    values = {name: post.get(name, "") for name in TEXT_FIELDS}
    values["goal"] = values["goal"].replace("\r\n", "\n")
    rows, errors = files_read(
        uploads=files.getlist("upload"),
        folder=values["upload_folder"],
        paths=post.getlist("file_path"),
        contents=post.getlist("file_content"),
    )
    return NewTaskForm(values=values, tools=post.getlist("tools"), files=rows, errors=errors)


def _json(text: str, name: str, errors: list[dict[str, str]]) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        errors.append({"field": name, "message": f"not JSON: {exc}"})
        return None


def _model(values: dict[str, str], errors: list[dict[str, str]]) -> dict[str, Any] | None:
    kind = values["model_kind"] or "openai"
    if kind == "scripted":
        return {"kind": "scripted", "script": _json(values["model_script"], "model.script", errors)}
    if kind == OTHER:
        return None
    model: dict[str, Any] = {"kind": "openai"}
    if values["model_name"].strip():
        model["model"] = values["model_name"].strip()
    if values["model_base_url"]:
        model["base_url"] = values["model_base_url"]
    return model


def _agent(values: dict[str, str], errors: list[dict[str, str]]) -> dict[str, Any]:
    kind, _, name = values["agent"].partition(":")
    text = values["agent_input"].strip()
    if kind == "langgraph":
        graph_input = _json(text, "agent.input", errors) if text else {}
        return {"kind": kind, "graph": name, "input": graph_input}
    agent: dict[str, Any] = {"kind": kind, "name": name, "input": text}
    if text[:1] in ("[", "{"):
        agent["input"] = _json(text, "agent.input", errors)
    model = _model(values, errors) if values["model_name"].strip() else None
    if model is not None:
        agent["model"] = model
    return agent


def spec_from_form(form: NewTaskForm) -> dict[str, Any]:
    """The spec the form describes (errors of its own JSON inputs go to `form.errors`)."""
    values, errors = form.values, form.errors
    spec: dict[str, Any] = {
        "title": values["title"],
        "goal": values["goal"],
        "priority": values["priority"] or "default",
        "tools": [*form.tools, *(t.strip() for t in values["tools_more"].split(",") if t.strip())],
    }
    budget = {
        n: values[f"budget_{n}"].strip() for n in BUDGET_FIELDS if values[f"budget_{n}"].strip()
    }
    if budget:
        spec["budget"] = budget
    if values["plan_mode"]:
        spec["mode"] = "plan"
    if form.files:
        spec["workspace"] = {"files": files_as_spec(form.files)}
    if values["agent"] in ("", LOOP):
        model = _model(values, errors)
        if model is not None:
            spec["model"] = model
    elif values["agent"] != OTHER:
        spec["agent"] = _agent(values, errors)
    if values["other"].strip():
        other = _json(values["other"], "other", errors)
        if not isinstance(other, dict):
            if other is not None:
                errors.append({"field": "other", "message": "must be a JSON object"})
            return spec
        for key, value in other.items():
            if key in spec:
                errors.append({"field": "other", "message": f"{key} is set by the form above"})
            else:
                spec[key] = value
    return spec


def _model_values(model: dict[str, Any] | None, values: dict[str, str]) -> bool:
    """Fill the model inputs from a spec's model; False: the form cannot show it."""
    if not model:
        return True
    if model.get("kind") == "scripted" and set(model) <= {"kind", "script"}:
        values["model_kind"] = "scripted"
        values["model_script"] = json.dumps(model.get("script"), indent=1)
        return True
    if model.get("kind") == "openai" and set(model) <= {"kind", "model", "base_url"}:
        values["model_kind"] = "openai"
        values["model_name"] = model.get("model") or ""
        values["model_base_url"] = model.get("base_url") or ""
        return True
    return False


def _agent_values(agent: dict[str, Any], values: dict[str, str]) -> bool:
    kind = agent.get("kind")
    if kind not in AGENT_KINDS or not _model_values(agent.get("model"), values):
        return False
    values["agent"] = f"{kind}:{agent.get('graph') or agent.get('name') or ''}"
    given = agent.get("input")
    values["agent_input"] = given if isinstance(given, str) else json.dumps(given, indent=1)
    return True


def form_from_spec(spec: dict[str, Any]) -> NewTaskForm:
    """The form filled in with `spec` (a template's): what it has no input for goes to
    "Other spec sections"."""
    values = dict.fromkeys(TEXT_FIELDS, "")
    rest = dict(spec)
    for name in ("title", "goal", "priority"):
        values[name] = str(rest.pop(name, "") or "")
    if rest.get("mode") in ("plan", "run", None):
        values["plan_mode"] = "on" if rest.pop("mode", None) == "plan" else ""
    for name, value in (rest.pop("budget", None) or {}).items():
        values[f"budget_{name}"] = "" if value is None else str(value)
    files = (rest.get("workspace") or {}).get("files") or {}
    if set(rest.get("workspace") or {}) <= {"files"}:
        rest.pop("workspace", None)
    tools = rest.pop("tools", [])
    values["agent"], values["model_kind"] = LOOP, "openai"
    if "agent" in rest:
        if _agent_values(rest["agent"], values):
            rest.pop("agent")
        else:
            values["agent"] = OTHER
    elif _model_values(rest.get("model"), values):
        rest.pop("model", None)
    else:
        values["model_kind"] = OTHER
    if rest:
        values["other"] = json.dumps(rest, indent=1)
    rows = [FileRow(path=path, content=content) for path, content in files.items()]
    return NewTaskForm(values=values, tools=list(tools), files=[] if "workspace" in rest else rows)
