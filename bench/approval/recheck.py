"""The re-check at decision time (the file read again, compared to what the reviewer saw),
sampled on its own and profiled."""

from __future__ import annotations

import time
import uuid
from typing import Any

from bench.approval.steps import CONF, _decide, _paused, _status
from bench.common import RqWorker, profile_top, tasks_delete, wait_for


def _recheck_samples(user: Any, n: int) -> tuple[dict[str, list[float]], Any]:
    """({recheck: wall seconds, recheck_cpu: this process's CPU seconds, policy: wall seconds
    of the policy evaluation, interleaved} per execution-time re-check of one approved
    `write_file service.conf`, paused in this process under an admin rule and approved through
    the review service; the task's id). Leaves the approved task's job on the queue: the
    worker runs it first, before the approvals are measured."""
    from django.utils import timezone

    from agent.runtime.loop import task_run
    from review.models import ReviewRequest, ReviewRule
    from review.policy import evaluate
    from review.recheck import approval_recheck
    from review.services import review_decide
    from tasks.canonical import canonical_hash
    from tasks.fingerprint import call_targets
    from tasks.models import ToolCall
    from tasks.services import task_create
    from tasks.spec import TaskSpec
    from tasks.tools.registry import ToolContext, registry

    name = f"bench-recheck-{uuid.uuid4().hex[:8]}"
    rule = ReviewRule.objects.create(name=name, tool="write_file", action="review")
    try:
        spec = TaskSpec.model_validate(
            {
                "title": "bench recheck",
                "goal": "benchmark",
                "tools": ["write_file"],
                "workspace": {"files": {"service.conf": CONF}},
                "model": {
                    "kind": "scripted",
                    "script": [
                        {"call": "write_file", "args": {"path": "service.conf", "content": "x"}},
                        {"final": "done"},
                    ],
                },
            }
        )
        task = task_create(spec=spec, user=None)  # queued: the worker's job finds it paused
        if task_run(task_id=task.id) != "paused":
            raise RuntimeError("the write_file call did not pause for review")
        review = ReviewRequest.objects.get(task_id=task.id, status="pending")
        review_decide(
            review_id=review.id,
            user=user,
            decision="approve",
            arguments_hash=canonical_hash(review.arguments),
        )
        task.refresh_from_db()
        row = ToolCall.objects.get(pk=review.tool_call_id)
        tool = registry.get("write_file")
        args = tool.args_model.model_validate(row.arguments)
        ctx = ToolContext(
            task_id=str(task.id), call_id=row.call_id, workspace=task.workspace_path, timeout_s=30
        )
        samples: dict[str, list[float]] = {"recheck": [], "recheck_cpu": [], "policy": []}
        for _ in range(n):
            # Interleaved reference: the policy evaluation every call pays already (one query).
            started = time.perf_counter()
            evaluate(tool=tool, args=row.arguments, spec=task.spec)
            samples["policy"].append(time.perf_counter() - started)
            started, cpu = time.perf_counter(), time.process_time()
            check = approval_recheck(
                tool_call=row,
                tool=tool,
                task=task,
                targets=lambda: call_targets(
                    tool=tool, ctx=ctx, args=args, arguments=row.arguments
                ),
                now=timezone.now(),
            )
            samples["recheck"].append(time.perf_counter() - started)
            samples["recheck_cpu"].append(time.process_time() - cpu)
            if not check.holds:
                raise RuntimeError(f"the approval did not hold: {check.changes}")
    finally:
        rule.delete()
    return samples, task.id


def _profiled(client: Any, worker: RqWorker) -> tuple[list[dict], int]:
    """(the profile of one more decision request, in this process; its query count)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    key = f"bench-approval-{uuid.uuid4().hex}"
    task, review = _paused(worker, key)
    with CaptureQueriesContext(connection) as queries:
        _decide(client, review)
    counted = len(queries.captured_queries)
    wait_for(lambda: _status(task.id) == "succeeded", what="the task to finish")
    tasks_delete([task.id])
    task, review = _paused(worker, f"bench-approval-{uuid.uuid4().hex}")
    top = profile_top(lambda: _decide(client, review))
    wait_for(lambda: _status(task.id) == "succeeded", what="the task to finish")
    tasks_delete([task.id])
    return top, counted
