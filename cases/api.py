"""`/api/v1/…` endpoints of saved cases and replays (issue #31): save a finished task as a case,
list and read cases, start a replay, read a replay's comparison report. Saving and replaying
are operators' (as recovery is); reading is any role's. Thin: parse, call one service or
selector, shape the output."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from ninja import Field, Router, Schema, Status

from cases import selectors, services
from cases.models import Case, CaseRun
from harness_base.http import AuthedRequest
from tasks.schemas import ERRORS, ErrorOut
from tasks.selectors import access_task
from tasks.services import SpecError
from tasks.web.api_auth import OPERATE

router = Router(tags=["cases"])


class SaveCaseIn(Schema):
    name: str = Field(min_length=1, max_length=200)
    tags: list[str] = Field(default_factory=list, max_length=20)
    # Keys of cases.criteria.CaseCriteria replacing the defaults drawn from the recording.
    criteria: dict[str, Any] | None = None


class CaseOut(Schema):
    id: UUID
    name: str
    tags: list[str]
    source_task_id: UUID | None
    criteria: dict[str, Any]
    created_at: datetime
    steps: int
    calls: int

    @staticmethod
    def resolve_steps(obj: Case) -> int:
        return len(obj.recording.get("steps", []))

    @staticmethod
    def resolve_calls(obj: Case) -> int:
        return len(obj.recording.get("calls", []))


class ReplayIn(Schema):
    # A candidate model spec (as a TaskSpec's `model`); none: the recorded decisions.
    model: dict[str, Any] | None = None
    on_divergence: Literal["stop", "sandbox"] = "stop"


class CaseRunOut(Schema):
    id: UUID
    case_id: UUID
    task_id: UUID
    model: str
    on_divergence: str
    created_at: datetime
    report_url: str

    @staticmethod
    def resolve_report_url(obj: CaseRun) -> str:
        return f"/api/v1/cases/runs/{obj.id}"


@router.post("tasks/{task_id}/save-case", auth=OPERATE, response={201: CaseOut, **ERRORS})
def case_save(request: AuthedRequest, task_id: str, body: SaveCaseIn):
    task = access_task(request.user, task_id)
    try:
        case = services.case_save(
            task=task, user=request.user, name=body.name, tags=body.tags, criteria=body.criteria
        )
    except selectors.CaseUnsavable as exc:
        return Status(409, {"detail": str(exc)})
    return Status(201, case)


@router.get("cases", response=list[CaseOut])
def case_list(request: AuthedRequest, tag: str | None = None):
    return selectors.cases_list(tag=tag)


@router.get("cases/runs/{run_id}", response={200: dict[str, Any], 404: ErrorOut})
def case_run_report(request: AuthedRequest, run_id: str):
    """The recorded run beside the replay, step by step, with the verdict."""
    return selectors.case_run_report(case_run=selectors.access_case_run(request.user, run_id))


@router.get("tasks/{task_id}/compare", response={200: dict[str, Any], 404: ErrorOut})
def tasks_compare(request: AuthedRequest, task_id: str, other: str):
    """The task beside `other` (a fork, a sibling), step by step, with the report of a
    replay; `siblings` lists the family of forks together."""
    task = access_task(request.user, task_id)
    return selectors.tasks_compare(task=task, other=access_task(request.user, other))


@router.get("cases/{case_id}", response=CaseOut)
def case_get(request: AuthedRequest, case_id: str):
    return selectors.access_case(request.user, case_id)


@router.post("cases/{case_id}/replay", auth=OPERATE, response={201: CaseRunOut, **ERRORS})
def case_replay(request: AuthedRequest, case_id: str, body: ReplayIn):
    case = selectors.access_case(request.user, case_id)
    try:
        run = services.case_replay_start(
            case=case, user=request.user, model=body.model, on_divergence=body.on_divergence
        )
    except SpecError as exc:
        return Status(
            422,
            {
                "detail": "invalid replay",
                "errors": [{"field": exc.field, "message": exc.message}],
            },
        )
    return Status(201, run)
