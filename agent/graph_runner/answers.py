"""The decided reviews of a graph's interrupts (GraphRunAnswers, part of GraphRun): the
reviews asked at a checkpoint, those a rejection stopped the task on, approvals checked again
before the graph is resumed with them (recheck_approvals), and the resume value (answers)."""

from __future__ import annotations

from typing import Any

from agent.graph_runner.calls import GraphRunCalls
from agent.graph_runner.core import REVIEW_KIND
from agent.runtime.run import StopRun
from agent.sdk_run.rechecks import approvals_drifted, approvals_reasked, reviews_reopen
from review.models import ReviewRequest
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
        (agent.sdk_run.rechecks); one that no longer holds reopens its review and the task
        waits for it."""
        drifted = approvals_drifted(self, reviews)
        if not drifted:
            return
        approvals_reasked(
            self, drifted, move=lambda row: self.call_move(row, ToolCallStatus.AWAITING_REVIEW)
        )
        self.pause(
            reason=f"graph interrupt: approval no longer holds: {drifted[0][0].tool}",
            then=lambda: reviews_reopen(
                self, drifted, kind=REVIEW_KIND, checkpoint_of=lambda _review: None
            ),
        )

    @staticmethod
    def answers(reviews: list[ReviewRequest]) -> dict[str, Any]:
        """Command(resume=...) by interrupt id: a batched HumanInTheLoopMiddleware request gets
        {"decisions": [...]} in action order, any other interrupt its single answer."""
        answers: dict[str, Any] = {}
        batched: dict[str, list[tuple[int, Any]]] = {}
        for review in reviews:
            interrupt = interrupt_of(review)
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


def interrupt_of(review: ReviewRequest) -> dict[str, Any]:
    """What a graph review records of its interrupt ({} for a review without one)."""
    return review.interrupt or {}


def stop(error_class: str, message: str, reviews: list[ReviewRequest]) -> StopRun:
    """The task stops on these decided reviews (its `task_stopped` event names them, so a
    retry asks again instead of stopping on them once more)."""
    return StopRun(error_class, message, payload={"stopped_reviews": [r.id for r in reviews]})
