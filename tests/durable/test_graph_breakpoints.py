"""Static breakpoints (`interrupt_before` / `interrupt_after`, LangGraph's classic
human-in-the-loop) on LangGraph's prebuilt `create_react_agent`, run by real rqworkers: the
graph stopping at one is a review per pending tool call; approve runs the tool, an edit runs
the edited arguments, a rejection reaches the model as the tool's answer, and the breakpoint
is not asked about again once decided."""

from __future__ import annotations

import pytest
from langchain_core.messages import ToolMessage

from agent.graph_runner.loading import graph_thread_config
from checkpoints.langgraph.saver import DjangoCheckpointSaver
from review.models import ReviewRequest
from tasks.models import AuditEntry, ToolCall
from tests.conftest import ApiClient, approve, page_client
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
        '  react_charge: "tests.durable.graphs:react_charge"\n'
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
    assert review.interrupt["allowed"] == ["approve", "edit", "reject", "respond"]
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


def test_respond_answers_the_tool_call_without_running_the_tool(fleet, operator):
    fleet.worker(1)
    task = graph_task("react_charge", react_input({"amount": 5}, tool="charge_card"))
    wait_status(task.id, "waiting_review")
    review = ReviewRequest.objects.get(task=task)
    assert review.tool == "charge_card" and "respond" in review.interrupt["allowed"]
    response = ApiClient(operator).decide(
        review.id, decision="respond", response="card declined: send an invoice"
    )
    assert response.status_code == 200, response.content

    task = wait_status(task.id, "succeeded", "failed")
    assert task.status == "succeeded", task.error_message
    # The graph went on as if the tool had returned the response; the tool never ran.
    assert task.result == "results: card declined: send an invoice"
    assert not (task.workspace_path / "charges.txt").exists()
    saved = DjangoCheckpointSaver(task_id=task.id).get_tuple(graph_thread_config(task_id=task.id))
    answers = [
        m for m in saved.checkpoint["channel_values"]["messages"] if isinstance(m, ToolMessage)
    ]
    assert [(m.tool_call_id, m.content, m.status) for m in answers] == [
        ("call-0", "card declined: send an invoice", "success")
    ]
    call = ToolCall.objects.get(task=task)
    assert call.status == "succeeded"
    assert call.result == {"value": "card declined: send an invoice", "answered_by": "operator"}
    assert AuditEntry.objects.get(action="review_respond").actor == operator
    assert ReviewRequest.objects.filter(task=task).count() == 1


def test_respond_on_a_breakpoint_from_the_review_page(fleet, operator):
    fleet.worker(1)
    task = graph_task("react_charge", react_input({"amount": 7}, tool="charge_card"))
    wait_status(task.id, "waiting_review")
    review = ReviewRequest.objects.get(task=task)
    client = page_client(operator)
    page = client.get(f"/reviews/{review.id}/")
    assert b'data-testid="respond"' in page.content
    response = client.post(
        f"/reviews/{review.id}/decide/", {"decision": "respond", "response": "paid in cash"}
    )
    assert response.status_code == 302, response.content

    task = wait_status(task.id, "succeeded", "failed")
    assert task.status == "succeeded", task.error_message
    assert task.result == "results: paid in cash"
    assert not (task.workspace_path / "charges.txt").exists()
