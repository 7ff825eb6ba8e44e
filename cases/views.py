"""Pages of saved cases and replays (issue #31): the list, a case with its replays, a replay's
comparison with the recording, and the operators' actions (save a task as a case, replay a
case). Thin: parse, call one service or selector, render."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect, render

from cases import selectors, services
from cases.models import OnDivergence
from harness_base.http import AuthedRequest
from tasks.selectors import access_task, user_can_operate
from tasks.services import SpecError
from tasks.web.access import operator_required, viewer_required


@viewer_required
def case_list(request: AuthedRequest) -> HttpResponse:
    tag = request.GET.get("tag", "")[:50]
    return render(
        request, "cases/list.html", {"cases": selectors.cases_list(tag=tag or None), "tag": tag}
    )


@viewer_required
def case_detail(request: AuthedRequest, case_id) -> HttpResponse:
    case = selectors.access_case(request.user, case_id)
    return render(
        request,
        "cases/detail.html",
        {
            "case": case,
            "runs": selectors.case_runs(case=case),
            "can_operate": user_can_operate(request.user),
            "modes": OnDivergence.values,
        },
    )


@viewer_required
def case_run_page(request: AuthedRequest, run_id) -> HttpResponse:
    run = selectors.access_case_run(request.user, run_id)
    return render(
        request,
        "cases/run.html",
        {"run": run, "report": selectors.case_run_report(case_run=run)},
    )


@viewer_required
def tasks_compare_page(request: AuthedRequest, task_id) -> HttpResponse:
    """Two tasks of a family of forks side by side (?other=), step by step, as a replay is
    compared with its recording."""
    task = access_task(request.user, task_id)
    other = access_task(request.user, request.GET.get("other", ""))
    return render(
        request,
        "cases/compare.html",
        {
            "task": task,
            "other": other,
            "report": selectors.tasks_compare(task=task, other=other),
        },
    )


@operator_required
def case_save(request: AuthedRequest, task_id) -> HttpResponse:
    if request.method != "POST":
        return redirect("tasks:detail", task_id)
    task = access_task(request.user, task_id)
    tags = [t.strip() for t in request.POST.get("tags", "").split(",") if t.strip()]
    name = request.POST.get("name", "").strip()[:200]
    if not name:
        messages.error(request, "A case needs a name.")
        return redirect("tasks:detail", task.id)
    try:
        case = services.case_save(task=task, user=request.user, name=name, tags=tags)
    except selectors.CaseUnsavable as exc:
        messages.error(request, f"Not saved: {exc}")
        return redirect("tasks:detail", task.id)
    messages.success(request, f"Saved as case {case.name}.")
    return redirect("cases:detail", case.id)


@operator_required
def case_replay(request: AuthedRequest, case_id) -> HttpResponse:
    case = selectors.access_case(request.user, case_id)
    if request.method != "POST":
        return redirect("cases:detail", case.id)
    try:
        run = services.case_replay_start(
            case=case,
            user=request.user,
            on_divergence=request.POST.get("on_divergence", OnDivergence.STOP),
        )
    except SpecError as exc:
        messages.error(request, f"Not started: {exc.field}: {exc.message}")
        return redirect("cases:detail", case.id)
    return redirect("cases:run", run.id)
