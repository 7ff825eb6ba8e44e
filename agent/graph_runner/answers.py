"""The decided reviews of a graph's interrupts (GraphRunAnswers, part of GraphRun): the
reviews asked at a checkpoint, those a rejection stopped the task on, approvals checked again
before the graph is resumed with them (recheck_approvals), and the resume value (answers)."""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from agent.graph_runner.calls import GraphRunCalls
from agent.graph_runner.core import REVIEW_KIND
from agent.runtime.run import StopRun
from agent.versions import versions_current
from review.models import ReviewRequest, ReviewStatus
from review.recheck import interrupt_recheck
from review.services.transitions import review_request_open
from tasks.events import EventType
from tasks.models import ToolCallStatus


class GraphRunAnswers(GraphRunCalls):
    """GraphRun's decided reviews: reviews_of, stopped_reviews, recheck_approvals,
    answers."""

    def reviews_of(self, checkpoint_id: str) -> list[ReviewRequest]:
        """The reviews of the interrupts at this checkpoint (a reopened one: its new review)."""
        return [
            review
            for review in ReviewRequest.objects.filter(
                task_id=self.task_id, kind=REVIEW_KIND, reopened_as__isnull=True
            )
            if (review.interrupt or {}).get("checkpoint_id") == checkpoint_id
        ]

    def stopped_reviews(self) -> set[int]:
        """The reviews whose rejection stopped the task (`stop`): a retry asks again."""
        return {
            review_id
            for payload in self.task.events.filter(type=EventType.TASK_STOPPED).values_list(
                "payload", flat=True
            )
            for review_id in (payload or {}).get("stopped_reviews", [])
        }

    def recheck_approvals(self, reviews: list[ReviewRequest]) -> None:
        """Just before the graph is resumed with them, approved actions are checked again
        (review.recheck.interrupt_recheck: deadline, approvers, policy). One that no longer
        holds is not delivered: a new pending review of it says what changed, and the task
        waits for it."""
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
        for review, check in drifted:
            self.call_move(review.tool_call, ToolCallStatus.AWAITING_REVIEW)
            self.event(
                EventType.REVIEW_REQUESTED,
                {
                    "call_id": review.tool_call.call_id,
                    "tool": review.tool,
                    "reopened_from": review.id,
                    "changes": check.changes,
                },
            )

        def reopen() -> None:
            for review, check in drifted:
                review_request_open(
                    tool_call=review.tool_call,
                    checkpoint_id=None,
                    decision=check.policy,
                    preview=review.preview,
                    kind=REVIEW_KIND,
                    interrupt={k: v for k, v in review.interrupt.items() if k != "decision"},
                    reopened_from=review,
                    changes=check.changes,
                    versions=versions_current(self),
                )

        self.pause(
            reason=f"graph interrupt: approval no longer holds: {drifted[0][0].tool}", then=reopen
        )

    @staticmethod
    def answers(reviews: list[ReviewRequest]) -> dict[str, Any]:
        """Command(resume=...) by interrupt id: a batched HumanInTheLoopMiddleware request gets
        {"decisions": [...]} in action order, any other interrupt its single answer."""
        answers: dict[str, Any] = {}
        batched: dict[str, list[tuple[int, Any]]] = {}
        for review in reviews:
            interrupt = review.interrupt
            decision = (
                interrupt["decision"]
                if "decision" in interrupt
                else {"type": "reject", "message": ""}
            )
            if interrupt["mode"] == "batched":
                batched.setdefault(interrupt["id"], []).append((interrupt["index"], decision))
            else:
                answers[interrupt["id"]] = decision
        for interrupt_id, decisions in batched.items():
            answers[interrupt_id] = {"decisions": [d for _i, d in sorted(decisions)]}
        return answers


def stop(error_class: str, message: str, reviews: list[ReviewRequest]) -> StopRun:
    """The task stops on these decided reviews (its `task_stopped` event names them, so a
    retry asks again instead of stopping on them once more)."""
    stop = StopRun(error_class, message)
    stop.payload = {"stopped_reviews": [r.id for r in reviews]}
    return stop
