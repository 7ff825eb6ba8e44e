"""`/api/v1/templates…`: a person's saved task templates (issue #45 item 3). List and read one's
own, save a spec (or a task's) as a template, start a task from one with changed inputs.
Templates are their creator's alone (tasks.selectors.access_template): another person's is a
404. Every operation needs the role that creates tasks. Thin: parse, call one service or
selector, shape the output."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from ninja import Field, Router, Schema, Status
from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from harness_base.http import AuthedRequest
from tasks import selectors, services
from tasks.models import TaskTemplate
from tasks.schemas import ErrorOut, TaskOut
from tasks.spec import TaskSpec
from tasks.web.api_auth import CREATE
from tasks.web.spec_errors import spec_errors

router = Router(tags=["templates"])

ERRORS = {403: ErrorOut, 404: ErrorOut, 422: ErrorOut}


class TemplateIn(Schema):
    """A new template: `spec` (a TaskSpec, as `POST /api/v1/tasks` takes it) or `task_id` (that
    task's spec), exactly one."""

    name: str = Field(min_length=1, max_length=200)
    spec: TaskSpec | None = None
    task_id: UUID | None = None

    @model_validator(mode="after")
    def _one_source(self) -> TemplateIn:
        if (self.spec is None) == (self.task_id is None):
            raise ValueError("give exactly one of 'spec' or 'task_id'")
        return self


class TemplateStartIn(BaseModel):
    """Changes to the template's spec, keyed as a TaskSpec (`title`, `goal`, `workspace`,
    `budget`, `agent`, ...): objects merge key by key (`{"workspace": {"files": {"b.txt":
    "2"}}}` keeps the template's other files), anything else replaces. `{}`: as saved."""

    model_config = ConfigDict(extra="allow")


class TemplateOut(Schema):
    id: UUID
    name: str
    spec: dict[str, Any]
    source_task_id: UUID | None
    created_at: datetime
    start_url: str

    @staticmethod
    def resolve_start_url(obj: TaskTemplate) -> str:
        return f"/api/v1/templates/{obj.id}/start"


def _invalid(errors: list[dict[str, str]], detail: str = "invalid task spec") -> Status:
    return Status(422, {"detail": detail, "errors": errors})


@router.get("templates", auth=CREATE, response=list[TemplateOut])
def template_list(request: AuthedRequest):
    """Your templates, newest first."""
    return selectors.templates_of(request.user)


@router.post("templates", auth=CREATE, response={201: TemplateOut, **ERRORS})
def template_create(request: AuthedRequest, body: TemplateIn):
    source = None
    if body.task_id is None:
        assert body.spec is not None  # TemplateIn._one_source: exactly one of the two
        spec = body.spec
    else:
        source = selectors.access_task(request.user, body.task_id)
        try:
            spec = TaskSpec.model_validate(source.spec)
        except ValidationError as exc:
            # A spec stored under older rules: say what no longer holds.
            return _invalid(spec_errors(exc, prefix="task.spec."), "the task's spec is invalid")
    try:
        template = services.template_create(
            name=body.name, spec=spec, user=request.user, source_task=source
        )
    except services.SpecError as exc:
        return _invalid([{"field": f"spec.{exc.field}", "message": exc.message}])
    return Status(201, template)


@router.get("templates/{template_id}", auth=CREATE, response={200: TemplateOut, 404: ErrorOut})
def template_get(request: AuthedRequest, template_id: str):
    return selectors.access_template(request.user, template_id)


@router.post("templates/{template_id}/start", auth=CREATE, response={201: TaskOut, **ERRORS})
def template_start(request: AuthedRequest, template_id: str, body: TemplateStartIn):
    """Start a task from the template, its spec changed by the body (TemplateStartIn), checked
    and created as `POST /api/v1/tasks` would. Errors name the field of the spec."""
    changes = body.model_dump()
    template = selectors.access_template(request.user, template_id)
    try:
        task = services.template_start(template=template, user=request.user, changes=changes)
    except ValidationError as exc:
        return _invalid(spec_errors(exc))
    except services.SpecError as exc:
        return _invalid([{"field": exc.field, "message": exc.message}])
    return Status(201, task)
