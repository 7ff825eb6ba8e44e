"""HarnessTools: the Pydantic AI capability that takes every tool call of the agent through
the run's tool hooks (tool_calls: before, tool_results: after), in the job's thread, with
the call's `execute_tool` span; in a replay of a case, a matched call answered from the
recording or run and checked against it (replay)."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.exceptions import ApprovalRequired, CallDeferred, ModelRetry

from agent.pydantic_ai_runner.tool_calls import ToolCallHooks
from agent.sdk_run.inline import inline
from agent.tracing import tool_span


@dataclass(init=False)
class HarnessTools(AbstractCapability):
    """Every tool call of the agent through the harness: ledger, policy, replay."""

    def __init__(self, run: ToolCallHooks) -> None:
        self.run = run

    async def wrap_tool_execute(self, ctx, *, call, tool_def, args, handler):
        plan = inline(
            self.run.tool_begin,
            call=call,
            tool_def=tool_def,
            args=args,
            approved=ctx.tool_call_approved,
        )
        if plan.action == "replay" or plan.action == "refuse":
            return plan.value
        if plan.action == "retry":
            raise ModelRetry(plan.value)
        if plan.action == "approval":
            raise ApprovalRequired(metadata={"harness": plan.value})
        row, raised = plan.row, None
        if plan.recorded is not None and not plan.live:
            # A replay's call the recording answers, without running the tool.
            return inline(self.run.replay_answer, row=row, recorded=plan.recorded)
        with tool_span(
            tool=row.tool,
            call_id=row.call_id,
            attempt=row.attempts,
            arguments=row.arguments,
            parent=self.run.trace_parent,
        ) as traced:
            try:
                result = await handler(args)
            except (ApprovalRequired, CallDeferred) as exc:
                # The tool itself asked (ApprovalRequired raised before it acted): reviewed.
                inline(self.run.tool_deferred, row=row)
                raised = exc
            except BaseException as exc:
                inline(self.run.tool_end, row=row, error=exc)
                raised = exc
            else:
                inline(self.run.tool_end, row=row, result=result)
            traced.finished(
                status=row.status,
                error_class=row.error_class if raised is not None else "",
                error_message=row.error_message if raised is not None else "",
                result=None if raised is not None else result,
            )
        if plan.recorded is not None:
            # A replay's call that ran: its answer is the recorded one, or the divergence.
            inline(self.run.replay_compare, row=row, recorded=plan.recorded)
        if raised is not None:  # raised here: the span's status is the row's, not the raise's
            raise raised
        return result
