"""A task's model usage: calls, tokens and cost per step and in total, from the events that
carry one model call's usage."""

from __future__ import annotations

from typing import Any

from django.db.models import Count, FloatField, Sum
from django.db.models.functions import Cast

from tasks.models import Task, TaskEvent
from tasks.selectors.event_fields import PayloadText

# Events whose payload carries one model call's usage (prompt_tokens, completion_tokens,
# cost_usd): the turns, the context summaries and the final-answer reviews.
USAGE_EVENTS = frozenset({"model_decision", "context_folded", "final_checked"})


def task_model_usage(
    events: list[dict[str, Any]], *, earlier: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Model calls, tokens and cost per step (oldest first) and in total, from the event
    summaries (`task_event_summaries`). `earlier`: the totals of the steps before those events
    (task_model_usage_before), when only the later steps' events were read; `steps_before`
    says how many steps they were."""
    steps: dict[int, dict[str, Any]] = {}
    for event in events:
        if event["type"] not in USAGE_EVENTS or event.get("prompt_tokens") is None:
            continue
        step = event["step_index"] or 0
        row = steps.setdefault(
            step,
            {"step": step, "calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "cost_usd": 0.0},
        )
        row["calls"] += 1
        row["prompt_tokens"] += int(event["prompt_tokens"])
        row["completion_tokens"] += int(event.get("completion_tokens") or 0)
        row["cost_usd"] += float(event.get("cost_usd") or 0)
    rows = list(steps.values())
    earlier = earlier or {"steps": 0, "calls": 0, "cost_usd": 0.0}
    return {
        "steps": rows,
        "steps_in_all": len(rows) + earlier["steps"],
        "calls": sum(r["calls"] for r in rows) + earlier["calls"],
        "cost_usd": sum(r["cost_usd"] for r in rows) + earlier["cost_usd"],
    }


def task_model_usage_before(*, task: Task, step: int) -> dict[str, Any]:
    """{steps, calls, cost_usd}: the model usage of the task's steps before `step`, summed by
    the database (what task_model_usage adds when the page reads only the later steps)."""
    totals = (
        TaskEvent.objects.filter(task=task, type__in=list(USAGE_EVENTS), step_index__lt=step)
        .annotate(prompt_tokens=PayloadText("prompt_tokens"))
        .filter(prompt_tokens__isnull=False)
        .aggregate(
            steps=Count("step_index", distinct=True),
            calls=Count("*"),
            cost_usd=Sum(Cast(PayloadText("cost_usd"), output_field=FloatField())),
        )
    )
    return {**totals, "cost_usd": totals["cost_usd"] or 0.0}
