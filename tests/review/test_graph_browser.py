"""LangGraph interrupts reviewed in headless Chromium: an operator approves a plain interrupt,
edits a HumanInTheLoopMiddleware tool call and rejects another interrupt; real workers resume
each graph with the decision (the worker processes that paused them have exited meanwhile)."""

from __future__ import annotations

import json

import pytest

from review.models import ReviewRequest
from tasks.models import Task, ToolCall
from tests.conftest import BROWSER, wait_for
from tests.factories import graph_task

pytestmark = [*BROWSER, pytest.mark.integration]


def status(task: Task) -> str:
    return Task.objects.values_list("status", flat=True).get(pk=task.pk)


def test_operator_approves_edits_and_rejects_graph_interrupts_in_the_browser(
    live_server, workers, open_page, operator
):
    release = "release_bot"
    approve = graph_task(release, {"changes": ["fix"], "current": "1.4.0"}, title="release 1.5")
    reject = graph_task(release, {"changes": ["breaking"], "current": "2.1.0"}, title="release 3.0")
    message = {"channel": "#general", "text": "v1.5 is out"}
    edit = graph_task(
        "announcer",
        {"messages": [{"role": "user", "content": json.dumps(message)}]},
        title="announce",
    )
    for task in (approve, reject, edit):
        wait_for(lambda t=task: status(t) == "waiting_review", 120, message="the graph to pause")
    # The workers that paused the graphs exit; new ones resume them.
    workers.stop()
    assert all(p.poll() is not None for p in workers.processes)
    workers.start(2)

    page = open_page(operator, "/reviews/", timeout_ms=60_000)  # a loaded CI machine

    def open_review(task: Task) -> None:
        review = ReviewRequest.objects.get(task=task)
        page.goto(f"{live_server.url}/reviews/{review.id}/")
        assert page.query_selector("[data-testid=graph-interrupt]") is not None

    # A plain interrupt: approve, reject or respond; no edit form.
    open_review(approve)
    assert '"version": "1.5.0"' in page.inner_text("[data-testid=current-arguments]")
    assert page.query_selector("[data-testid=edit-approve]") is None
    assert page.query_selector("[data-testid=respond]") is not None
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("[data-testid=approve]")
    # Each decision goes on to the next review (or the inbox), saying it was recorded.
    page.wait_for_selector(".messages .msg-success")

    open_review(reject)
    page.fill("input[name=reason]", "not this week")
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("[data-testid=reject]")
    page.wait_for_selector(".messages .msg-success")

    # The middleware's tool call: edit the arguments, then approve.
    open_review(edit)
    page.fill("[data-testid=arguments]", json.dumps({**message, "channel": "#releases"}))
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("[data-testid=edit-approve]")
    page.wait_for_selector(".messages .msg-success")

    for task in (approve, reject, edit):
        wait_for(lambda t=task: status(t) == "succeeded", 120, message="the graph to finish")
    assert '"published": "1.5.0"' in Task.objects.get(pk=approve.pk).result
    rejected = Task.objects.get(pk=reject.pk).result
    assert '"published": ""' in rejected and "not this week" in rejected
    edited = Task.objects.get(pk=edit.pk).result
    assert "posted to #releases: v1.5 is out" in edited and "#general" not in edited
    calls = {t.title: ToolCall.objects.get(task=t) for t in (approve, reject, edit)}
    assert {title: c.status for title, c in calls.items()} == {
        "release 1.5": "succeeded",
        "release 3.0": "rejected",
        "announce": "succeeded",
    }
    assert calls["announce"].arguments["channel"] == "#releases"

    page.goto(f"{live_server.url}/tasks/{edit.pk}/?tab=checkpoints")
    assert page.query_selector("[data-testid=graph-checkpoints]") is not None
