"""Start a task from the browser (issue #45 item 3): the New task page, and saving a spec (the
page's, or a task's) as a template to start again with changed inputs. The spec is validated
by TaskSpec and created by task_create, as `POST /api/v1/tasks` does: an error is shown beside
the input of the field the API names, with everything the person gave kept."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST
from pydantic import ValidationError

from dashboard.new_task import (
    LOOP,
    TEXT_FIELDS,
    NewTaskForm,
    form_from_post,
    form_from_spec,
    spec_from_form,
)
from dashboard.new_task_choices import new_task_choices
from harness_base.http import AuthedRequest
from tasks import selectors, services
from tasks.models import TaskTemplate
from tasks.spec import TaskSpec
from tasks.web.access import creator_required
from tasks.web.spec_errors import spec_errors

TEMPLATE_NAME_MAX = 200


def _blank() -> NewTaskForm:
    values = dict.fromkeys(TEXT_FIELDS, "")
    values.update(agent=LOOP, model_kind="openai", priority="default")
    return NewTaskForm(values=values)


def _submitted(request: AuthedRequest, form: NewTaskForm) -> TaskTemplate | str | None:
    """Start the task or save the template the form describes: the new task's id, the saved
    template, or None with `form.errors` said."""
    spec_data = spec_from_form(form)
    saving = request.POST.get("action") == "save_template"
    name = form.values["template_name"].strip()
    if saving and not 0 < len(name) <= TEMPLATE_NAME_MAX:
        message = f"a template needs a name of 1 to {TEMPLATE_NAME_MAX} characters"
        form.errors.append({"field": "template_name", "message": message})
    if form.errors:
        return None
    try:
        spec = TaskSpec.model_validate(spec_data)
        if saving:
            return services.template_create(name=name, spec=spec, user=request.user)
        return str(services.task_create(spec=spec, user=request.user).id)
    except ValidationError as exc:
        form.errors.extend(spec_errors(exc))
    except services.SpecError as exc:
        form.errors.append({"field": exc.field, "message": exc.message})
    return None


@creator_required
def task_new(request: AuthedRequest) -> HttpResponse:
    """GET: the form, blank or filled in from one of your templates (`?template=`). POST: start
    the task (or, with action=save_template, save the form as a template)."""
    status = 200
    if request.method == "POST":
        form = form_from_post(request.POST, request.FILES)
        done = _submitted(request, form)
        if isinstance(done, TaskTemplate):
            messages.success(request, f"Saved as template {done.name}.")
            return redirect(f"{reverse('tasks:new')}?template={done.id}")
        if done is not None:
            messages.success(request, "Task started.")
            return redirect("tasks:detail", task_id=done)
        status = 422
    elif request.GET.get("template"):
        template = selectors.access_template(request.user, request.GET["template"])
        form = form_from_spec(template.spec)
        form.values["template_name"] = template.name
    else:
        form = _blank()
    return render(request, "tasks/new.html", _context(request, form), status=status)


def _context(request: AuthedRequest, form: NewTaskForm) -> dict[str, Any]:
    choices = new_task_choices()
    errors = form.errors_by_place()
    offered = {t["name"] for t in choices["tool_choices"]}
    budget_rows = [
        {
            "name": name,
            "place": f"budget_{name}",
            "value": form.values.get(f"budget_{name}", ""),
            "default": default,
            "errors": errors.get(f"budget_{name}", []),
        }
        for name, default in choices["budget_defaults"].items()
    ]
    return {
        "form": form,
        "errors": errors,
        "templates": selectors.templates_of(request.user)[:50],
        "default_model": settings.HARNESS_MODEL,
        "budget_rows": budget_rows,
        # Tools the spec names that the registry does not list (an MCP server's), kept.
        "extra_tools": [name for name in form.tools if name not in offered],
        **choices,
    }


@require_POST
@creator_required
def task_save_template(request: AuthedRequest, task_id) -> HttpResponse:
    """Save a task's spec as your template, then show it on the New task page to change and
    start again."""
    task = selectors.access_task(request.user, task_id)
    name = request.POST.get("name", "").strip() or task.title
    try:
        spec = TaskSpec.model_validate(task.spec)
        template = services.template_create(
            name=name[:TEMPLATE_NAME_MAX], spec=spec, user=request.user, source_task=task
        )
    except ValidationError as exc:
        problems = "; ".join(f"{e['field']}: {e['message']}" for e in spec_errors(exc))
        messages.error(request, f"Not saved: the task's spec is invalid now ({problems}).")
        return redirect("tasks:detail", task_id=task.id)
    except services.SpecError as exc:
        messages.error(request, f"Not saved: {exc.field}: {exc.message}")
        return redirect("tasks:detail", task_id=task.id)
    messages.success(
        request, f"Saved as template {template.name}: change what you like and start it."
    )
    return redirect(f"{reverse('tasks:new')}?template={template.id}")
