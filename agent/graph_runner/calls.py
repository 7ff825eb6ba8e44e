"""The graph's reviewed calls (GraphRunCalls, part of GraphRun): each a ToolCall row,
moved by call_move and saved by the next fenced write; delivered with the resume, found in
flight after a crash, abandoned when the graph will never be resumed with them, settled by
the tool's result, the super-step after the resume, or the run's end."""

from __future__ import annotations

from typing import Any

from agent.graph_runner.core import REVIEW_KIND
from agent.graph_runner.tracing import GraphRunTracing
from agent.graph_runner.values import text
from review.models import ReviewRequest, ReviewStatus
from tasks import services
from tasks.models import ToolCall, ToolCallStatus

# Calls whose decision is consumed by the super-step after the resume (no tool result).
SETTLED_BY_STEP = ("plain", "breakpoint")


class GraphRunCalls(GraphRunTracing):
    """GraphRun's reviewed calls: call_move and calls_delivered, calls_in_flight,
    calls_abandon, calls_settle."""

    def call_move(self, row: ToolCall, to: str, **fields: Any) -> None:
        """Move a graph call to `to`, saved by the next fenced write (the one place this
        module changes a ToolCall's status)."""
        names = _toolcall_status(row, to, fields)
        _row, known = self.pending_calls.get(row.pk, (row, set()))
        self.pending_calls[row.pk] = (row, known | names)

    def calls_delivered(self, reviews: list[ReviewRequest]) -> None:
        """The graph is resumed with these decisions: the approved calls run now."""
        for review in reviews:
            row = review.tool_call
            if row is not None and row.status == ToolCallStatus.APPROVED:
                self.call_move(row, ToolCallStatus.RUNNING)
                self.delivered[row.pk] = (row, review.interrupt or {})

    def calls_in_flight(self) -> None:
        """Calls a run that died (kill -9, lost lease) had resumed the graph with: they are
        still running, and this run settles them."""
        for review in ReviewRequest.objects.filter(
            task_id=self.task_id, kind=REVIEW_KIND, tool_call__status=ToolCallStatus.RUNNING
        ).select_related("tool_call"):
            self.delivered[review.tool_call.pk] = (review.tool_call, review.interrupt or {})

    def calls_abandon(self, *, keep: str | None, only_canceled: bool = False) -> None:
        """Calls the graph will never be resumed with: those whose review was canceled (a
        cancel or rollback; the graph asks again with a new call) and, unless `only_canceled`,
        those asked at another checkpoint than `keep` (a rollback went back before them; None:
        the graph finished). They fail."""
        for review in ReviewRequest.objects.filter(
            task_id=self.task_id,
            kind=REVIEW_KIND,
            tool_call__status__in=[ToolCallStatus.AWAITING_REVIEW, ToolCallStatus.APPROVED],
        ).select_related("tool_call"):
            if review.tool_call_id in self.pending_calls:
                continue
            canceled = review.status == ReviewStatus.CANCELED
            elsewhere = (review.interrupt or {}).get("checkpoint_id") != keep
            if canceled or (elsewhere and not only_canceled):
                self.call_move(
                    review.tool_call,
                    ToolCallStatus.FAILED,
                    error_class="review_canceled" if canceled else "superseded",
                    error_message=(
                        "its review was canceled; the graph asks again"
                        if canceled
                        else "the graph moved on without this decision"
                    ),
                )

    def calls_settle(self, *, message: Any = None, to: str = "", **fields: Any) -> ToolCall | None:
        """A tool message settles the delivered call of that tool (by tool call id when the
        interrupt named one; -> its row); without a message, every delivered call goes `to` —
        or, with neither, the plain interrupts, whose decision the super-step just stored
        consumed. Each settled call is an `execute_tool` span, from when it was delivered."""
        for pk, (row, meta) in list(self.delivered.items()):
            if message is not None:
                wanted = meta.get("tool_call_id")
                if meta.get("mode") in SETTLED_BY_STEP or (
                    getattr(message, "tool_call_id", None) != wanted
                    if wanted
                    else getattr(message, "name", "") != row.tool
                ):
                    continue
                failed = getattr(message, "status", "success") == "error"
                self.call_move(
                    row,
                    ToolCallStatus.FAILED if failed else ToolCallStatus.SUCCEEDED,
                    result={"content": text(message.content)},
                    **(
                        {"error_class": "tool_error", "error_message": text(message.content)}
                        if failed
                        else {}
                    ),
                )
                del self.delivered[pk]
                self.call_traced(row)
                return row
            if to or meta.get("mode") in SETTLED_BY_STEP:
                self.call_move(row, to or ToolCallStatus.SUCCEEDED, **fields)
                del self.delivered[pk]
                self.call_traced(row)
        return None


def _toolcall_status(row: ToolCall, to: str, fields: dict[str, Any]) -> set[str]:
    """Move a graph call to `to` on the row, unsaved (tasks.services.toolcall_transition sets
    the status and the times it implies); -> the fields to save."""
    services.toolcall_transition(call=row, to=to, fields=fields, write=False)
    return {"status", "started_at", "finished_at", *fields}
