"""Resuming from approvals (RunDecisions, part of PydanticAIRun): the reviewers' decisions as
Pydantic AI takes them (`decisions`: DeferredToolResults), each approval checked again
before it is delivered (`recheck_approvals`: one that no longer holds reopens its review
and the task waits again)."""

from __future__ import annotations

from typing import Any

from django.utils import timezone
from pydantic_ai import DeferredToolResults, ToolDenied
from pydantic_ai.tools import ToolApproved

from agent.pydantic_ai_runner.constants import KIND, REVIEW_KIND
from agent.pydantic_ai_runner.endings import RunEndings
from agent.versions import versions_current
from review.models import ReviewRequest, ReviewStatus
from review.recheck import interrupt_recheck
from review.services.transitions import review_request_open
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
        for item in deferred:
            review = reviews[item["call_id"]]
            row = review.tool_call
            if row.status == ToolCallStatus.APPROVED:
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
                    d["call_id"]: type(approvals[d["tool_call_id"]]).__name__ for d in deferred
                },
            },
        )
        self.sdk["deferred"] = []
        return DeferredToolResults(approvals=approvals)

    def recheck_approvals(self, reviews: list[ReviewRequest]) -> None:
        """Just before the agent is resumed with them, approvals are checked again
        (review.recheck.interrupt_recheck: deadline, approvers, policy). One that no longer
        holds is not delivered: a new pending review of the call says what changed, and the
        task waits for it."""
        now = timezone.now()
        drifted = [
            (review, check)
            for review in reviews
            if review.status == ReviewStatus.APPROVED
            for check in [interrupt_recheck(review=review, task=self.task, now=now)]
            if not check.holds
        ]
        if not drifted:
            return
        updates: list[tuple[Any, list[str]]] = []
        for review, check in drifted:
            row = review.tool_call
            services.toolcall_transition(call=row, to=ToolCallStatus.AWAITING_REVIEW, write=False)
            updates.append((row, ["status"]))
            self.event(
                EventType.REVIEW_REQUESTED,
                {
                    "call_id": row.call_id,
                    "tool": row.tool,
                    "reopened_from": review.id,
                    "changes": check.changes,
                },
            )

        def reopen(_checkpoint: Any) -> None:
            for review, check in drifted:
                review_request_open(
                    tool_call=review.tool_call,
                    checkpoint_id=review.checkpoint_id,
                    decision=check.policy,
                    preview=review.preview,
                    kind=REVIEW_KIND,
                    interrupt={k: v for k, v in review.interrupt.items() if k != "decision"},
                    reopened_from=review,
                    changes=check.changes,
                    versions=versions_current(self),
                )

        self.pause(
            reason=f"approval no longer holds: {drifted[0][0].tool}", updates=updates, then=reopen
        )
