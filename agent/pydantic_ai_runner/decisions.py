"""Resuming from approvals (RunDecisions, part of PydanticAIRun): the reviewers' decisions as
Pydantic AI takes them (`decisions`: DeferredToolResults; an external call's answer is its
result, a rejection a ToolFailed the model sees), each approval checked again
before it is delivered (`recheck_approvals`: one that no longer holds reopens its review
and the task waits again)."""

from __future__ import annotations

from typing import Any

from pydantic_ai import DeferredToolResults, ToolDenied, ToolFailed
from pydantic_ai.tools import ToolApproved

from agent.pydantic_ai_runner.constants import KIND, REVIEW_KIND
from agent.pydantic_ai_runner.endings import RunEndings
from agent.sdk_run.rechecks import approvals_drifted, approvals_reasked, reviews_reopen
from review.models import ReviewRequest, ReviewStatus
from tasks import services
from tasks.canonical import canonical_hash
from tasks.events import EventType
from tasks.models import ToolCallStatus


class RunDecisions(RunEndings):
    """The answers to the approvals a run paused for."""

    def decisions(self) -> DeferredToolResults | None:
        """The reviewers' decisions on the approvals the run paused for, as Pydantic AI takes
        them; None (the agent asks again) when a review was canceled (a cancel or a rollback);
        pauses again while one is still pending."""
        deferred = self.sdk["deferred"]
        reviews = {
            review.tool_call.call_id: review
            for review in ReviewRequest.objects.filter(
                task_id=self.task_id,
                kind=REVIEW_KIND,
                reopened_as__isnull=True,
                tool_call__call_id__in=[d["call_id"] for d in deferred],
            )
            .select_related("tool_call")
            .order_by("id")
        }
        if any(
            d["call_id"] not in reviews or reviews[d["call_id"]].status == ReviewStatus.CANCELED
            for d in deferred
        ):
            self.sdk["deferred"] = []
            return None
        if any(r.status == ReviewStatus.PENDING for r in reviews.values()):
            self.pause(reason="reviews still pending")
        self.recheck_approvals(list(reviews.values()))
        approvals: dict[str, Any] = {}
        calls: dict[str, Any] = {}
        answered_by: dict[str, str] = {}
        for item in deferred:
            review = reviews[item["call_id"]]
            row = review.tool_call
            if item.get("external"):
                calls[item["tool_call_id"]] = _external_answer(review)
                if review.status == ReviewStatus.RESPONDED:
                    answered_by[item["tool_call_id"]] = (row.result or {}).get("answered_by", "")
            elif row.status == ToolCallStatus.APPROVED:
                edited = canonical_hash(row.arguments) != canonical_hash(review.original_arguments)
                approvals[item["tool_call_id"]] = (
                    ToolApproved(override_args=row.arguments) if edited else ToolApproved()
                )
            elif review.status == ReviewStatus.EXPIRED:
                approvals[item["tool_call_id"]] = ToolDenied(
                    message=f"the review of {row.tool} expired before a decision; it did not run"
                )
            else:
                reason = review.comment or review.decision_reason or row.error_message
                approvals[item["tool_call_id"]] = ToolDenied(
                    message=f"a reviewer rejected {row.tool}: {reason or 'no reason given'}; "
                    "it did not run"
                )
        self.event(
            EventType.GRAPH_RESUMED,
            {
                "agent": KIND,
                "answers": {
                    d["call_id"]: "answered"
                    if d["tool_call_id"] in answered_by
                    else type({**approvals, **calls}[d["tool_call_id"]]).__name__
                    for d in deferred
                },
            },
        )
        self.sdk["deferred"] = []
        return DeferredToolResults(approvals=approvals, calls=calls, answered_by=answered_by)

    def recheck_approvals(self, reviews: list[ReviewRequest]) -> None:
        """Just before the agent is resumed with them, approvals are checked again
        (agent.sdk_run.rechecks); one that no longer holds reopens its review of the call and
        the task waits for it."""
        drifted = approvals_drifted(self, reviews)
        if not drifted:
            return
        updates: list[tuple[Any, list[str]]] = []

        def move(row: Any) -> None:
            services.toolcall_transition(call=row, to=ToolCallStatus.AWAITING_REVIEW, write=False)
            updates.append((row, ["status"]))

        approvals_reasked(self, drifted, move=move)
        self.pause(
            reason=f"approval no longer holds: {drifted[0][0].tool}",
            updates=updates,
            then=lambda _checkpoint: reviews_reopen(
                self, drifted, kind=REVIEW_KIND, checkpoint_of=lambda review: review.checkpoint_id
            ),
        )


def _external_answer(review: ReviewRequest) -> Any:
    """What an external call returns to the agent: the operator's response (settled on the
    call as its result when they answered, review.services), or a failure the model is told
    of when they rejected it or the review expired."""
    row = review.tool_call
    if review.status == ReviewStatus.RESPONDED:
        return (row.result or {}).get("value")
    if review.status == ReviewStatus.EXPIRED:
        return ToolFailed(f"the review of {row.tool} expired before anyone answered; no result")
    reason = review.comment or review.decision_reason or row.error_message
    return ToolFailed(
        f"a reviewer rejected {row.tool}: {reason or 'no reason given'}; it has no result"
    )
