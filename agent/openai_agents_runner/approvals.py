"""The harness's gate (ApprovalGate, part of AgentsRun): every pending approval of the
RunState answered from the ledger; a new call's row takes the policy's decision (the tool's
own needs_approval, the harness's rules), a refused call's message, a hosted call delivered."""

from __future__ import annotations

import dataclasses
from typing import Any

from agent.openai_agents_runner.reviews import ReviewPauses
from agent.openai_agents_runner.values import Approval, approval_of, arguments_of
from agent.sdk_run.unknown import INTERRUPTED, unknown_outcomes_ask
from review.policy import PolicyDecision, graph_action_policy
from tasks import services
from tasks.canonical import canonical_hash
from tasks.events import EventType
from tasks.models import ToolCall, ToolCallStatus

# Ledger statuses whose call runs when the SDK resumes (the wrapper replays a finished one).
_RUNS = {
    ToolCallStatus.PROPOSED,
    ToolCallStatus.APPROVED,
    ToolCallStatus.RUNNING,
    ToolCallStatus.SUCCEEDED,
    ToolCallStatus.FAILED,
}
_REFUSED = {ToolCallStatus.REJECTED, ToolCallStatus.DENIED}
# Ledger statuses whose call the gate lets run without a pause (gate_inline).
_RUNS_INLINE = {ToolCallStatus.PROPOSED, ToolCallStatus.SUCCEEDED, ToolCallStatus.FAILED}


class ApprovalGate(ReviewPauses):
    """AgentsRun's approvals: decide, hosted_delivered, new_call, policy, refusal_text."""

    def decide(self, state: Any) -> None:
        """Answer every pending approval of the RunState from the ledger, creating the rows of
        new calls with the policy's decision. Pauses (ends the job) while any needs a person."""
        waiting: list[tuple[ToolCall, PolicyDecision, str]] = []
        unknown: list[ToolCall] = []
        for item in state.get_interruptions():
            approval = approval_of(item)
            call_id = self.call_id(approval.sdk_call_id)
            row = self.ledger.get(call_id)
            if row is None:
                row, decision, why = self.new_call(approval, call_id)
                if row.status == ToolCallStatus.AWAITING_REVIEW:
                    waiting.append((row, decision, why))
                    continue
            if row.status in INTERRUPTED and row.call_id not in self.pending_rows:
                unknown.append(row)  # the worker died while it ran: its outcome is unknown
            elif row.status == ToolCallStatus.AWAITING_REVIEW:
                waiting.append((row, PolicyDecision(action="review"), ""))
            elif row.status in _REFUSED:
                state.reject(item, rejection_message=self.refusal_text(row))
            elif row.status in _RUNS:
                state.approve(item)
                if approval.hosted and row.status != ToolCallStatus.SUCCEEDED:
                    self.hosted_delivered(row)
            else:  # a person settles it first
                waiting.append((row, PolicyDecision(action="review"), ""))
        if unknown:
            unknown_outcomes_ask(self, unknown)
        if waiting:
            self.pause_for_reviews(waiting)
        self.recheck_approvals(state)
        if self.pending_rows:
            self.commit()

    def gate_inline(self, tool: str, params: Any, sdk_call_id: str) -> bool:
        """The gate in the SDK's loop (the wrapped tool's needs_approval): whether the call
        stops the run for `decide`. A new call the policy allows gets its row and runs, as a
        call that ran (it replays) or failed (it runs again) does; any other call stops the
        run (a review, a deny, a person's approval rechecked, an unknown outcome), as does a
        call of a turn that was not recorded (its response would not be durable before it
        runs: turns.RecordedTurns)."""
        if not self.inline or sdk_call_id not in self.recorded_calls:
            return True
        call_id = self.call_id(sdk_call_id)
        row = self.ledger.get(call_id)
        if row is not None:
            return row.status not in _RUNS_INLINE
        approval = Approval(
            item=None,
            sdk_call_id=sdk_call_id,
            tool=tool[:100],
            arguments=arguments_of(params),
            hosted=False,
        )
        decision, why = self.policy(approval)
        if decision.action != "allow":
            return True  # `decide` opens its review or refuses it, as for any paused call
        self.new_call(approval, call_id, decided=(decision, why))
        # As the turn's model_decision event lists it (model_turns).
        self.proposed[call_id] = canonical_hash(approval.arguments)
        return False

    def hosted_delivered(self, row: ToolCall) -> None:
        """A hosted MCP call runs at the provider once approved: the approval delivered to the
        SDK is as far as the harness sees it."""
        services.toolcall_transition(
            call=row, to=ToolCallStatus.RUNNING, fields={"attempts": row.attempts + 1}, write=False
        )
        services.toolcall_transition(
            call=row,
            to=ToolCallStatus.SUCCEEDED,
            fields={"result": {"output": "approved; the hosted MCP server runs it"}},
            write=False,
        )
        self.pending_rows[row.call_id] = row

    def new_call(
        self,
        approval: Approval,
        call_id: str,
        *,
        decided: tuple[PolicyDecision, str] | None = None,
    ) -> tuple[ToolCall, PolicyDecision, str]:
        decision, why = decided or self.policy(approval)
        if self.replay is not None:
            decision = self.replay_claim(
                call_id=call_id, tool=approval.tool, args=approval.arguments, decision=decision
            )
        row = ToolCall(
            task_id=self.task_id,
            call_id=call_id,
            tool=approval.tool,
            arguments=approval.arguments,
            arguments_hash=canonical_hash(approval.arguments),
            risk=self.mcp_risk.get(approval.tool) or ("mcp" if approval.hosted else "agent"),
            step_index=self.state.step_index,
        )
        self.ledger[call_id] = row
        self.pending_rows[call_id] = row
        if decision.action == "deny":
            services.toolcall_transition(
                call=row,
                to=ToolCallStatus.DENIED,
                fields={"error_class": "denied", "error_message": decision.reason[:2000]},
                write=False,
            )
            self.event(
                EventType.TOOL_REFUSED,
                {"call_id": call_id, "tool": row.tool, "reason": decision.reason},
            )
        elif decision.action == "review":
            services.toolcall_transition(call=row, to=ToolCallStatus.AWAITING_REVIEW, write=False)
        return row, decision, why

    def policy(self, approval: Approval) -> tuple[PolicyDecision, str]:
        """The tool's own `needs_approval` (and a hosted MCP tool's approval request) always
        pauses; the harness's rules decide the other calls."""
        risk = self.mcp_risk.get(approval.tool, "graph")
        decision = graph_action_policy(tool_name=approval.tool, args=approval.arguments, risk=risk)
        always = set((self.spec.review.always if self.spec.review else None) or [])
        asked = approval.hosted or self.sdk_asked.get(approval.sdk_call_id, False)
        if decision.action == "deny":
            return decision, decision.reason
        if asked:
            why = "the tool asks for approval (needs_approval)"
            if approval.hosted:
                why = "the hosted MCP tool asks for approval"
            return dataclasses.replace(
                decision, action="review", reason=decision.reason or why
            ), why
        if approval.tool in always:
            why = f"this task asks for review of every {approval.tool} call"
            return dataclasses.replace(decision, action="review", reason=why), why
        return decision, decision.reason

    @staticmethod
    def refusal_text(row: ToolCall) -> str:
        observation = (row.result or {}).get("observation")
        if observation:
            return str(observation)
        return f"The call of {row.tool} was not run: {row.error_message or row.status}."
