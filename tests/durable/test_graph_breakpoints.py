"""Static breakpoints (`interrupt_before` / `interrupt_after`, LangGraph's classic
human-in-the-loop) on LangGraph's prebuilt `create_react_agent`, run by real rqworkers: the
graph stopping at one is a review per pending tool call; approve runs the tool, an edit runs
the edited arguments, a rejection reaches the model as the tool's answer, and the breakpoint
is not asked about again once decided."""

from __future__ import annotations

import pytest

from review.models import ReviewRequest
from tasks.models import ToolCall
from tests.conftest import approve
from tests.factories import graph_task

from .conftest import TEST_CONFIG, wait_status
from .graphs import react_input

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def harness_config_text() -> str:
    return TEST_CONFIG + (
        "langgraph_graphs:\n"
        '  react_before_tools: "tests.durable.graphs:react_before_tools"\n'
        '  react_after_agent: "tests.durable.graphs:react_after_agent"\n'
    )


def reject(review: ReviewRequest, user, comment: str) -> None:
    from review.services import review_decide

    review_decide(review_id=review.id, user=user, decision="reject", comment=comment)


def test_interrupt_before_tools_opens_a_review_and_an_approval_runs_the_tool(fleet, operator):
    fleet.worker(1)
    task = graph_task("react_before_tools", react_input({"a": 1, "b": 2}))
    wait_status(task.id, "waiting_review")
    review = ReviewRequest.objects.get(task=task)
    assert review.kind == "langgraph" and review.tool == "add"
    assert review.original_arguments == {"a": 1, "b": 2}
    assert review.interrupt["mode"] == "breakpoint_tool"
    assert review.interrupt["tool_call_id"] == "call-0"
    assert review.interrupt["allowed"] == ["approve", "edit", "reject"]
    assert task.events.filter(type="graph_breakpoint").count() == 1
    approve(review, operator)

    task = wait_status(task.id, "succeeded", "failed")
    assert task.status == "succeeded", task.error_message
    assert task.result == "results: 1+2=3"
    # Decided once: the resumed run went past the breakpoint without asking again.
    assert ReviewRequest.objects.filter(task=task).count() == 1
    call = ToolCall.objects.get(task=task)
    assert call.status == "succeeded"
    assert call.result["content"] == "1+2=3"


def test_an_edit_runs_the_edited_arguments_and_a_rejection_is_told_to_the_model(fleet, operator):
    fleet.worker(1)
    task = graph_task("react_before_tools", react_input({"a": 1, "b": 2}, {"a": 5, "b": 5}))
    wait_status(task.id, "waiting_review")
    first, second = ReviewRequest.objects.filter(task=task).order_by("id")
    assert (first.original_arguments, second.original_arguments) == (
        {"a": 1, "b": 2},
        {"a": 5, "b": 5},
    )
    approve(first, operator, arguments={"a": 10, "b": 20})
    reject(second, operator, "not that one")

    task = wait_status(task.id, "succeeded", "failed")
    assert task.status == "succeeded", task.error_message
    assert "10+20=30" in task.result  # the edited call ran
    assert "1+2=3" not in task.result and "5+5" not in task.result
    assert "rejected this call to add" in task.result and "not that one" in task.result
    edited, rejected = ToolCall.objects.filter(task=task).order_by("id")
    assert (edited.status, edited.arguments) == ("succeeded", {"a": 10, "b": 20})
    assert edited.result["content"] == "10+20=30"
    assert rejected.status == "rejected"
    assert ReviewRequest.objects.filter(task=task).count() == 2


def test_interrupt_after_the_model_reviews_its_tool_calls_and_a_rejection_skips_the_tool(
    fleet, operator
):
    fleet.worker(1)
    task = graph_task("react_after_agent", react_input({"a": 2, "b": 2}))
    wait_status(task.id, "waiting_review")
    review = ReviewRequest.objects.get(task=task)
    assert review.tool == "add" and review.interrupt["breakpoint"] == "after"
    reject(review, operator, "no maths today")

    task = wait_status(task.id, "succeeded", "failed")
    assert task.status == "succeeded", task.error_message
    assert "no maths today" in task.result and "2+2=4" not in task.result
    assert ToolCall.objects.get(task=task).status == "rejected"
