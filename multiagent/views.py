"""Pages of multi-agent groups: the group panel of the task page (children, one timeline lane
per agent, global checkpoints) and the group rollback preview + confirm page. Thin: read
through selectors, act through services."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone

from harness_base.http import AuthedRequest
from multiagent import charts, recovery, selectors
from multiagent.shared import shared_files
from tasks.selectors import access_task, user_can_operate
from tasks.states import IllegalTransition, TransitionConflict
from tasks.web.access import operator_required, viewer_required


@viewer_required
def group_panel(request: AuthedRequest, task_id) -> HttpResponse:
    """The HTMX fragment under a group member's task page."""
    task = access_task(request.user, task_id)
    root = selectors.group_root(task)
    members = selectors.group_members(root=root)
    cuts = list(selectors.global_checkpoints(root=root))
    lanes = charts.group_timeline(members=members, global_checkpoints=cuts, now=timezone.now())
    return render(
        request,
        "multiagent/_group.html",
        {
            "task": task,
            "root": root,
            "children": members[1:],
            "global_checkpoints": cuts[::-1],
            "lanes": lanes,
            "lanes_summary": lanes.pop("summary"),
            "can_operate": user_can_operate(request.user),
            "shared_files": shared_files(root=root),
        },
    )


@operator_required
def group_rollback_page(request: AuthedRequest, task_id) -> HttpResponse:
    root = selectors.group_root(access_task(request.user, task_id))
    cut = selectors.global_checkpoint_get(
        root=root,
        global_checkpoint_id=request.GET.get("global_checkpoint_id")
        or request.POST.get("global_checkpoint_id"),
    )
    if cut is None:
        raise Http404("global checkpoint not found")
    error, status = "", 200
    if request.method == "POST":
        try:
            result = recovery.group_rollback(
                root_id=root.id,
                global_checkpoint_id=cut.id,
                user=request.user,
                reason=request.POST.get("reason", ""),
                resume=request.POST.get("then") == "resume",
            )
        except (
            recovery.RecoveryConflict,
            recovery.RecoveryInvalid,
            TransitionConflict,
            IllegalTransition,
        ) as exc:
            error = str(exc)
            status = 422 if isinstance(exc, recovery.RecoveryInvalid) else 409
        else:
            messages.success(
                request,
                f"Group rolled back to global checkpoint G{cut.seq}: "
                f"{len(result['participants'])} agent(s) restored, "
                f"{len(result['canceled'])} canceled.",
            )
            return redirect("tasks:detail", task_id=root.id)
    preview = recovery.group_rollback_preview(root=root, global_checkpoint=cut)
    return render(
        request,
        "multiagent/group_rollback.html",
        {"root": root, "cut": cut, "preview": preview, "error": error},
        status=status,
    )
