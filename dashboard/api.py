"""`GET /api/v1/stats/failures?since=&bucket=`: the failure statistics as JSON."""

from __future__ import annotations

from datetime import datetime

from django.http import HttpRequest
from django.utils import timezone
from ninja import Router, Schema, Status

from dashboard import stats
from dashboard.windows import Window, WindowError, window_parse

router = Router(tags=["stats"])


class ErrorOut(Schema):
    detail: str
    errors: list[dict[str, str]] | None = None


class WindowOut(Schema):
    since: datetime
    until: datetime
    bucket: str


class TaskOutcomesOut(Schema):
    succeeded: int
    # Of `succeeded`: without any failed or retried tool call, and after some.
    succeeded_clean: int
    succeeded_after_failed_calls: int
    # Successes after a person rejected a call / approved one with edited arguments.
    succeeded_with_rejected_calls: int
    succeeded_with_edited_calls: int
    failed: int
    canceled: int
    failure_rate: float | None


class RateOut(Schema):
    calls: int
    failed: int
    rate: float | None


class ToolRateOut(RateOut):
    tool: str


class ServerRateOut(RateOut):
    server: str
    tools: int


class StepRateOut(RateOut):
    step_index: int


class BucketRateOut(RateOut):
    tool: str
    bucket: datetime


class HeatCellOut(Schema):
    tool: str
    error_class: str
    failed: int


class RetriesOut(Schema):
    retries: int
    calls: int
    succeeded: int
    success_rate: float | None


class DurationOut(Schema):
    tool: str
    calls: int
    p50_ms: float
    p95_ms: float


class ReviewOutcomesOut(Schema):
    tool: str
    approved: int
    edited: int
    rejected: int
    expired: int
    canceled: int
    pending: int


class FailureGroupOut(Schema):
    fingerprint: str
    error_class: str
    message: str
    tasks: int
    first_seen: datetime
    last_seen: datetime


class HumanWaitOut(Schema):
    # "review": waiting for a reviewer's decision; "held": held by an operator. Over the tasks
    # that finished in the window; p50 / p95 of those that waited, within 4.4%.
    kind: str
    label: str
    tasks: int
    share: float | None
    total_s: float
    mean_s: float | None
    p50_s: float | None
    p95_s: float | None


class FailureStatsOut(Schema):
    window: WindowOut
    tasks: TaskOutcomesOut
    by_tool: list[ToolRateOut]
    # MCP tools (`<server>__<tool>`) summed per server.
    by_mcp_server: list[ServerRateOut]
    by_step: list[StepRateOut]
    over_time: list[BucketRateOut]
    heatmap: list[HeatCellOut]
    retries: list[RetriesOut]
    durations: list[DurationOut]
    reviews: list[ReviewOutcomesOut]
    groups: list[FailureGroupOut]
    waits: list[HumanWaitOut]


def _window(*, since: str | None, bucket: str | None) -> Window | Status:
    """The statistics' window, or the 422 that names the bad parameter."""
    try:
        return window_parse(since=since, bucket=bucket, now=timezone.now())
    except WindowError as exc:
        return Status(
            422,
            {"detail": "invalid input", "errors": [{"field": exc.field, "message": exc.message}]},
        )


@router.get("stats/failures", response={200: FailureStatsOut, 422: ErrorOut})
def failure_stats(request: HttpRequest, since: str | None = None, bucket: str | None = None):
    """Failure statistics over `since` (`24h`, `7d`, or an ISO datetime; default 24h), with
    time series bucketed by `bucket` (`hour` | `day`; default: hour up to 48h, else day)."""
    window = _window(since=since, bucket=bucket)
    if isinstance(window, Status):
        return window
    return Status(200, stats.failure_statistics(window))


class ReviewSlaRowOut(Schema):
    # The rule, tool, operator (who decided; "" for nobody) or via (where it was decided).
    key: str
    opened: int
    decided: int
    approved: int
    rejected: int
    expired: int
    # Approvals of edited arguments.
    edited: int
    notifications_failed: int
    # Decisions made without the decider having viewed the review page (which shows the diff).
    unviewed: int
    # Decided or expired later than the target time to decision (under a rule: its own).
    breached: int
    # A rule's target time to decision, seconds (by_rule only).
    target_s: float | None = None
    # Seconds, p50 / p95 from log-scale histograms (within 4.4%); null without any.
    first_view_p50_s: float | None
    first_view_p95_s: float | None
    decision_p50_s: float | None
    decision_p95_s: float | None
    on_page_p50_s: float | None
    on_page_p95_s: float | None


class ReviewLateOut(Schema):
    id: int
    tool: str
    rules: list[str]
    waited_s: float
    target_s: float


class ReviewSlaPointOut(Schema):
    # The hour or UTC day (the window's bucket) the reviews were opened in.
    bucket: datetime
    opened: int
    breached: int
    # Pending when the hour was last rolled.
    still_open: int
    decision_p50_s: float | None
    decision_p95_s: float | None


class ReviewSlaOut(Schema):
    window: WindowOut
    by_rule: list[ReviewSlaRowOut]
    by_tool: list[ReviewSlaRowOut]
    by_operator: list[ReviewSlaRowOut]
    by_via: list[ReviewSlaRowOut]
    # The default target time to decision (harness.yaml review_sla), seconds.
    target_s: float
    # Reviews opened in the window decided or expired past their target.
    breached: int
    # Reviews open past their target now, longest over first.
    past_target: list[ReviewLateOut]
    series: list[ReviewSlaPointOut]


@router.get("stats/reviews", response={200: ReviewSlaOut, 422: ErrorOut})
def review_stats(request: HttpRequest, since: str | None = None, bucket: str | None = None):
    """Review SLA statistics over the reviews opened since `since` (`24h`, `7d`, or an ISO
    datetime; default 24h): per rule, tool, operator and via; breaches of the target time to
    decision; and the series per `bucket` (hour or day; by the window's length by default)."""
    window = _window(since=since, bucket=bucket)
    if isinstance(window, Status):
        return window
    return Status(200, stats.review_sla_statistics(window))
