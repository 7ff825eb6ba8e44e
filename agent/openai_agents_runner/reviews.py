"""Pausing for people (ReviewPauses, part of AgentsRun): one review per call that needs one,
a person's approval checked again before the SDK gets it (calls of unknown outcome are
agent.sdk_run.unknown's); each ends the job with the task waiting for review."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any, NoReturn

from django.db import transaction

from agent.openai_agents_runner.replay import RunReplay
from agent.openai_agents_runner.values import KIND, approval_of
from agent.runtime.run import Paused
from agent.sdk_run.hosted import HostedTurn
from agent.sdk_run.rechecks import approvals_drifted, approvals_reasked, reviews_reopen
from agent.versions import versions_current
from review.models import ReviewRequest, ReviewStatus
from review.policy import PolicyDecision
from review.services.transitions import review_request_open
from tasks import services
from tasks.events import EventType
from tasks.models import ToolCall, ToolCallStatus
from tasks.spec import OpenAIAgentsSpec

REVIEW_KIND = "openai-agents"
DECISIONS = ["approve", "edit", "reject"]
HOSTED_DECISIONS = ["approve", "reject"]


class ReviewPauses(RunReplay):
    """AgentsRun's pauses for review: recheck_approvals, pause_for_reviews, pause_written."""

    @property
    def agent_spec(self) -> OpenAIAgentsSpec:
        """The task's `agent`: an OpenAI Agents SDK agent's (agent.jobs runs only those here)."""
        agent = self.spec.agent
        assert isinstance(agent, OpenAIAgentsSpec), f"not an OpenAI Agents task: {agent!r}"
        return agent

    def recheck_approvals(self, state: Any) -> None:
        """Just before the SDK is resumed with them, a person's approvals are checked again
        (review.recheck.interrupt_recheck: deadline, approvers, rules). One that no longer
        holds is not delivered: a new pending review of the call says what changed, and the
        task waits for it."""
        rows = {
            self.ledger[call_id].pk: self.ledger[call_id]
            for call_id in (
                self.call_id(approval_of(item).sdk_call_id) for item in state.get_interruptions()
            )
            if call_id in self.ledger and self.ledger[call_id].status == ToolCallStatus.APPROVED
        }
        if not rows:
            return
        drifted = approvals_drifted(
            self,
            ReviewRequest.objects.filter(
                tool_call_id__in=list(rows),
                status=ReviewStatus.APPROVED,
                reopened_as__isnull=True,
            ),
        )
        if not drifted:
            return

        def move(row: ToolCall) -> None:
            services.toolcall_transition(call=row, to=ToolCallStatus.AWAITING_REVIEW, write=False)
            self.pending_rows[row.call_id] = row

        def row_of(review: ReviewRequest) -> ToolCall:
            return rows[review.tool_call_id]

        approvals_reasked(self, drifted, move=move, row_of=row_of)
        with transaction.atomic():
            self.commit(checkpoint=("before_review", "tool"))
            reviews_reopen(
                self,
                drifted,
                kind=REVIEW_KIND,
                checkpoint_of=lambda _review: self.head_id,
                row_of=row_of,
            )
            self.wait_for_review(f"approval no longer holds: {drifted[0][0].tool}")
        raise Paused()

    def pause_for_reviews(
        self,
        waiting: list[tuple[ToolCall, PolicyDecision, str]],
        *,
        hosted: HostedTurn | None = None,
    ) -> NoReturn:
        """One review per call of `waiting` not reviewed yet, the task waiting_review. `hosted`:
        the calls are model turns' permissions to use hosted tools (agent.sdk_run.hosted):
        approve or reject, no edit; the approvals of it that no longer hold reopened."""
        pending = [
            row
            for row, _d, _w in waiting
            if ReviewRequest.objects.filter(
                tool_call__task_id=self.task_id,
                tool_call__call_id=row.call_id,
                status=ReviewStatus.PENDING,
            ).exists()
        ]
        reasked = hosted.reasked if hosted is not None else []
        fresh = [(r, d, w) for r, d, w in waiting if r not in pending and r not in reasked]
        for row, _decision, why in fresh:
            self.event(
                EventType.REVIEW_REQUESTED, {"call_id": row.call_id, "tool": row.tool, "why": why}
            )
        with transaction.atomic():
            self.commit(
                checkpoint=("before_review", "tool"), rows=[*(r for r, _d, _w in fresh), *reasked]
            )
            if hosted is not None:
                hosted.reopen(self, kind=REVIEW_KIND, checkpoint_id=self.head_id)
            for row, decision, why in fresh:
                review_request_open(
                    tool_call=row,
                    checkpoint_id=self.head_id,
                    decision=_as_review(decision, why),
                    preview=json.dumps(row.arguments, indent=2, ensure_ascii=False, default=str),
                    kind=REVIEW_KIND,
                    interrupt=_interrupt(row, hosted=hosted is not None),
                    versions=versions_current(self),
                )
            self.wait_for_review(f"approval needed: {waiting[0][0].tool}")
        raise Paused()

    def pause_written(
        self, reason: str, rows: list[ToolCall], then: Callable[[Any], None]
    ) -> NoReturn:
        """Pause for review: `rows` and a before_review checkpoint written, then(checkpoint
        id) (the reviews opened), the task waiting_review, in one transaction."""
        with transaction.atomic():
            self.commit(checkpoint=("before_review", "tool"), rows=rows)
            then(self.head_id)
            self.wait_for_review(reason)
        raise Paused()


def _interrupt(row: ToolCall, *, hosted: bool) -> dict[str, Any]:
    if hosted:
        return {
            "mode": "hosted_turn",
            "allowed": HOSTED_DECISIONS,
            "adapter": KIND,
            "hosted": row.tool,
        }
    return {"mode": "per_call", "allowed": DECISIONS, "adapter": KIND}


def _as_review(decision: PolicyDecision, why: str) -> PolicyDecision:
    return dataclasses.replace(decision, action="review", reason=(decision.reason or why)[:200])
