"""LangGraph graphs as tasks (agent.graph_runner): the registered examples run under the task
state machine; interrupts become reviews and decisions resume the graph. These call the RQ job
function in this process; test_graph_workers.py drives the same through real workers."""

from __future__ import annotations

import json
import re

import pytest

from agent.jobs import run_task
from review.models import ReviewRequest
from tasks.models import Task, TaskEvent, ToolCall
from tests.dashboard.test_timeline import timeline_of, traces
from tests.factories import graph_spec

pytestmark = pytest.mark.django_db(transaction=True)

RELEASE = graph_spec(
    "release_bot",
    {"changes": ["fix login", "faster search"], "current": "1.4.2"},
    title="release",
    goal="cut a release",
)
ANNOUNCEMENT = {"channel": "#general", "text": "v1.5 is out"}


def test_spec_needs_exactly_one_of_model_and_agent(task_api):
    both = {**RELEASE, "model": {"kind": "scripted", "script": [{"final": "x"}]}}
    response = task_api.client.post("/api/v1/tasks", both)
    assert response.status_code in (400, 422), response.content
    neither = {"title": "t", "goal": "g"}
    assert task_api.client.post("/api/v1/tasks", neither).status_code in (400, 422)


def test_unregistered_graph_is_refused_naming_the_field(task_api):
    spec = {**RELEASE, "agent": {"kind": "langgraph", "graph": "nope"}}
    response = task_api.client.post("/api/v1/tasks", spec)
    assert response.status_code in (400, 422)
    assert "agent.graph" in response.content.decode()


def test_graph_pauses_at_its_interrupt_and_finishes_after_approval(
    task_api, api_client, operator, as_user
):
    task = task_api.create(RELEASE)
    assert run_task(task["id"]) == "paused"
    assert task_api.get(task["id"])["status"] == "waiting_review"
    review = ReviewRequest.objects.get(task_id=task["id"])
    assert review.kind == "langgraph"
    assert review.original_arguments["version"] == "1.5.0"
    assert review.interrupt["allowed"] == ["approve", "reject", "respond"]

    response = api_client(operator).decide(review.id, decision="approve")
    assert response.status_code == 200, response.content
    assert run_task(task["id"]) == "succeeded"

    done = task_api.get(task["id"])
    assert done["status"] == "succeeded"
    assert '"published": "1.5.0"' in done["result"]
    # The approved interrupt ended like a native call: run with the decision, then succeeded.
    call = ToolCall.objects.get(task_id=task["id"])
    assert call.status == "succeeded"
    assert call.started_at is not None and call.finished_at >= call.started_at
    # The events tab says which node ran, for how long, at which super-step.
    page = as_user(operator).get(f"/tasks/{task['id']}/?tab=events").content.decode()
    nodes = re.findall(r'data-testid="graph-node">node (\w+) · \d+ ms', page)
    assert nodes[:3] == ["plan", "notes", "approve"]
    assert "super-step 1" in page and "the input" in page and "super-step -1" not in page
    assert "resumed with the reviewers' decisions" in page


def test_rejection_reaches_the_graph_with_the_comment(task_api, api_client, operator):
    task = task_api.create(RELEASE)
    run_task(task["id"])
    review = ReviewRequest.objects.get(task_id=task["id"])

    body = {"decision": "reject", "comment": "freeze week"}
    assert api_client(operator).decide(review.id, **body).status_code == 200
    assert run_task(task["id"]) == "succeeded"

    result = task_api.get(task["id"])["result"]
    assert '"published": ""' in result
    assert "publish: skipped (freeze week)" in result
    assert ToolCall.objects.get(task_id=task["id"]).status == "rejected"  # terminal


def test_respond_resumes_a_plain_interrupt_with_the_json_value(task_api, api_client, operator):
    task = task_api.create(RELEASE)
    run_task(task["id"])
    review = ReviewRequest.objects.get(task_id=task["id"])

    body = {"decision": "respond", "response": {"version": "2.0.0"}}
    assert api_client(operator).decide(review.id, **body).status_code == 200
    review.refresh_from_db()
    assert review.status == "responded"
    assert review.interrupt["decision"] == {"type": "respond", "value": {"version": "2.0.0"}}
    run_task(task["id"])

    assert '"published": "2.0.0"' in task_api.get(task["id"])["result"]
    # The graph went on with the answer: the call ran (it is not a rejected call).
    call = ToolCall.objects.get(task_id=task["id"])
    assert (call.status, call.error_class) == ("succeeded", "")
    assert call.result == {"response": {"version": "2.0.0"}}


def test_a_plain_interrupt_refuses_edited_arguments(task_api, api_client, operator):
    task = task_api.create(RELEASE)
    run_task(task["id"])
    review = ReviewRequest.objects.get(task_id=task["id"])

    response = api_client(operator).decide(
        review.id, decision="approve", arguments={"version": "9"}
    )

    assert response.status_code == 422
    assert task_api.get(task["id"])["status"] == "waiting_review"


ANNOUNCE = graph_spec(
    "announcer",
    {"messages": [{"role": "user", "content": json.dumps(ANNOUNCEMENT)}]},
    title="announce",
    goal="announce the release",
)


def test_middleware_tool_call_edited_in_review_runs_with_the_edited_arguments(
    task_api, api_client, operator, as_user
):
    task = task_api.create(ANNOUNCE)
    assert run_task(task["id"]) == "paused"
    review = ReviewRequest.objects.get(task_id=task["id"])
    assert review.tool == "send_announcement"
    assert review.original_arguments == {"channel": "#general", "text": "v1.5 is out"}
    assert review.interrupt["mode"] == "batched"
    assert set(review.interrupt["allowed"]) == {"approve", "edit", "reject", "respond"}

    edited = {"channel": "#releases", "text": "v1.5 is out"}
    body = {"decision": "approve", "arguments": edited}
    assert api_client(operator).decide(review.id, **body).status_code == 200
    assert run_task(task["id"]) == "succeeded"

    result = task_api.get(task["id"])["result"]
    assert "posted to #releases: v1.5 is out" in result
    assert "#general" not in result
    # The events tab says what the model asked for and that the tool answered.
    page = as_user(operator).get(f"/tasks/{task['id']}/?tab=events").content.decode()
    assert "the model asks for <strong>send_announcement</strong>" in page
    assert "<strong>send_announcement</strong> answered" in page
    # The gated call ran with the edited arguments and ended with the tool's result.
    call = ToolCall.objects.get(task_id=task["id"])
    assert call.status == "succeeded"
    assert call.arguments == edited
    assert "posted to #releases" in call.result["content"]


def test_rollback_forks_from_an_earlier_super_step_and_the_graph_runs_again_from_there(
    task_api, api_client, operator, as_user
):
    api = api_client(operator)
    task = task_api.create(RELEASE)
    run_task(task["id"])
    review = ReviewRequest.objects.get(task_id=task["id"])
    api.decide(review.id, decision="reject", comment="not yet")
    run_task(task["id"])
    assert "publish: skipped (not yet)" in task_api.get(task["id"])["result"]

    listed = api.get(f"/api/v1/tasks/{task['id']}/graph-checkpoints").json()
    assert [c["step"] for c in listed] == [4, 3, 2, 1, 0, -1]
    assert listed[0]["head"] and not any(c["superseded"] for c in listed)
    before_approval = next(c for c in listed if c["step"] == 2)  # next: approve

    preview = api.get(
        f"/api/v1/tasks/{task['id']}/graph-rollback/preview",
        {"checkpoint_id": before_approval["checkpoint_id"]},
    ).json()
    assert preview["values"]["version"] == "1.5.0"
    assert [c["step"] for c in preview["superseded"]] == [4, 3]
    page = as_user(operator).get(
        f"/tasks/{task['id']}/graph-checkpoints/{before_approval['checkpoint_id']}/rollback/"
    )
    assert page.status_code == 200
    assert "Roll back to step 2</button>" in page.content.decode()

    response = api.post(
        f"/api/v1/tasks/{task['id']}/rollback",
        {
            "checkpoint_id": before_approval["checkpoint_id"],
            "resume": True,
            "reason": "ask again",
        },
    )
    assert response.status_code == 200, response.content
    assert response.json()["graph_checkpoint_id"] == before_approval["checkpoint_id"]
    assert run_task(task["id"]) == "paused"  # the approval step runs again
    again = ReviewRequest.objects.filter(task_id=task["id"], status="pending").get()
    api.decide(again.id, decision="approve")
    assert run_task(task["id"]) == "succeeded"
    assert '"published": "1.5.0"' in task_api.get(task["id"])["result"]
    rejected, asked_again = ToolCall.objects.filter(task_id=task["id"]).order_by("id")
    assert (rejected.status, asked_again.status) == ("rejected", "succeeded")

    listed = api.get(f"/api/v1/tasks/{task['id']}/graph-checkpoints").json()
    superseded = sorted(c["step"] for c in listed if c["superseded"])
    assert superseded == [3, 4]
    forks = [c for c in listed if c["source"] == "fork"]
    assert len(forks) == 1 and forks[0]["parent_checkpoint_id"] == before_approval["checkpoint_id"]

    page = as_user(operator).get(f"/tasks/{task['id']}/?tab=checkpoints").content.decode()
    assert 'data-testid="graph-checkpoints"' in page
    assert before_approval["checkpoint_id"] in page
    assert "superseded" in page
    # The timeline draws each node run as a span on its node's row.
    assert "node \\u00b7 plan" in page or "node · plan" in page


def test_a_registered_graph_that_does_not_import_fails_the_task_naming_it(task_api, harness_yaml):
    harness_yaml('langgraph_graphs:\n  broken: "examples.no_such_module:graph"\n')
    task = task_api.create({**RELEASE, "agent": {"kind": "langgraph", "graph": "broken"}})
    run_task(task["id"])
    failed = task_api.get(task["id"])

    assert failed["status"] == "failed"
    assert failed["error_class"] == "graph_not_registered"
    assert "no_such_module" in failed["error_message"]


def test_a_graph_canceled_while_waiting_for_review_asks_again_when_resumed(
    task_api, api_client, operator
):
    from checkpoints.recovery import task_cancel, task_resume

    task = task_api.create(RELEASE)
    run_task(task["id"])
    task_cancel(task_id=task["id"], user=operator, reason="later")
    assert task_api.get(task["id"])["status"] == "canceled"
    assert ReviewRequest.objects.get(task_id=task["id"]).status == "canceled"

    task_resume(task_id=task["id"], user=operator, reason="now")
    assert run_task(task["id"]) == "paused"
    pending = ReviewRequest.objects.get(task_id=task["id"], status="pending")
    api_client(operator).decide(pending.id, decision="approve")
    assert run_task(task["id"]) == "succeeded"
    assert '"published": "1.5.0"' in task_api.get(task["id"])["result"]
    # The call asked before the cancel failed with its review; the one asked again ran.
    first, second = ToolCall.objects.filter(task_id=task["id"]).order_by("id")
    assert (first.status, first.error_class) == ("failed", "review_canceled")
    assert second.status == "succeeded"


def test_an_approved_interrupt_whose_resumed_step_fails_ends_failed_with_the_task(
    task_api, api_client, operator, harness_yaml
):
    harness_yaml('langgraph_graphs:\n  asks: "tests.durable.graphs:asks_then_fails"\n')
    task = task_api.create({**RELEASE, "agent": {"kind": "langgraph", "graph": "asks"}})
    assert run_task(task["id"]) == "paused"
    review = ReviewRequest.objects.get(task_id=task["id"])
    assert api_client(operator).decide(review.id, decision="approve").status_code == 200
    run_task(task["id"])
    failed = task_api.get(task["id"])

    assert failed["status"] == "failed" and failed["error_class"] == "graph_error"
    call = ToolCall.objects.get(task_id=task["id"])
    assert call.status == "failed"
    assert call.error_class == "graph_error"
    assert "the approved action broke" in call.error_message


def test_the_workspace_exists_before_the_graph_s_first_node_writes_into_it(task_api, harness_yaml):
    harness_yaml('langgraph_graphs:\n  note: "tests.durable.graphs:writes_first"\n')
    spec = {**RELEASE, "agent": {"kind": "langgraph", "graph": "note", "input": {"note": "hi"}}}
    task = task_api.create(spec)
    assert run_task(task["id"]) == "succeeded", task_api.get(task["id"])["error_message"]

    workspace = Task.objects.get(id=task["id"]).workspace_path
    assert (workspace / "note.txt").read_text() == "hi"


def test_a_breakpoint_before_a_plain_node_is_one_review_approve_goes_on_reject_stops(
    task_api, api_client, operator, harness_yaml, tmp_path
):
    from checkpoints.recovery import task_retry

    harness_yaml('langgraph_graphs:\n  stops: "tests.durable.graphs:stops_before_last"\n')
    spec = {
        **RELEASE,
        "agent": {"kind": "langgraph", "graph": "stops", "input": {"marker_dir": str(tmp_path)}},
    }
    task = task_api.create(spec)
    assert run_task(task["id"]) == "paused"
    review = ReviewRequest.objects.get(task_id=task["id"])
    assert review.tool == "last"
    assert review.original_arguments == {"breakpoint": "before", "next": ["last"]}
    assert review.interrupt["allowed"] == ["approve", "reject"]
    api = api_client(operator)
    assert api.decide(review.id, decision="reject", comment="not now").status_code == 200

    assert run_task(task["id"]) == "failed"
    stopped = task_api.get(task["id"])
    assert stopped["error_class"] == "breakpoint_rejected"
    assert "not now" in stopped["error_message"]
    assert (tmp_path / "runs").read_text().split() == ["first"]

    # A retry asks again; approved, the graph goes past the breakpoint once.
    task_retry(task_id=task["id"], user=operator, reason="go")
    assert run_task(task["id"]) == "paused"
    again = ReviewRequest.objects.get(task_id=task["id"], status="pending")
    assert api.decide(again.id, decision="approve").status_code == 200
    assert run_task(task["id"]) == "succeeded"
    assert (tmp_path / "runs").read_text().split() == ["first", "last"]
    assert '"trail": "first,last"' in task_api.get(task["id"])["result"]
    assert ToolCall.objects.get(id=again.tool_call_id).status == "succeeded"


def test_a_batched_middleware_review_with_an_edit_and_a_rejection_settles_each_call_alone(
    task_api, api_client, operator, harness_yaml
):
    """LangChain v1 create_agent + HumanInTheLoopMiddleware (langchain_core's fake model):
    two calls of the same tool in one batched review, one edited, one rejected."""
    from tests.durable.graphs import agent_input

    harness_yaml('langgraph_graphs:\n  two: "tests.durable.graphs:announcer_batched"\n')
    asked = [{"channel": "#general", "text": "v1.5"}, {"channel": "#random", "text": "spam"}]
    graph_input = agent_input(*asked, tool="send_announcement")
    task = task_api.create(
        {**RELEASE, "agent": {**ANNOUNCE["agent"], "graph": "two", "input": graph_input}}
    )
    assert run_task(task["id"]) == "paused"
    first, second = ReviewRequest.objects.filter(task_id=task["id"]).order_by("id")
    assert first.interrupt["mode"] == second.interrupt["mode"] == "batched"
    assert (first.interrupt["tool_call_id"], second.interrupt["tool_call_id"]) == (
        "call-0",
        "call-1",
    )
    api = api_client(operator)
    edited = {"channel": "#releases", "text": "v1.5"}
    assert api.decide(first.id, decision="approve", arguments=edited).status_code == 200
    assert api.decide(second.id, decision="reject", comment="no spam").status_code == 200
    assert run_task(task["id"]) == "succeeded"

    result = task_api.get(task["id"])["result"]
    assert "posted to #releases: v1.5" in result
    assert "with reason: no spam" in result  # the middleware told the model the reason
    ran, refused = ToolCall.objects.filter(task_id=task["id"]).order_by("id")
    assert (ran.status, ran.error_message) == ("succeeded", "")
    assert ran.arguments == edited and "posted to #releases" in ran.result["content"]
    assert "no spam" not in ran.result["content"]
    assert (refused.status, refused.error_message) == ("rejected", "no spam")
    assert "no spam" in refused.result["observation"]
    assert "no reason given" not in refused.result["observation"]


def test_a_batched_middleware_action_answered_with_respond_ends_with_the_answer(
    task_api, api_client, operator, harness_yaml
):
    from tests.durable.graphs import agent_input

    harness_yaml('langgraph_graphs:\n  two: "tests.durable.graphs:announcer_batched"\n')
    graph_input = agent_input({"channel": "#general", "text": "v1.5"}, tool="send_announcement")
    task = task_api.create(
        {**RELEASE, "agent": {**ANNOUNCE["agent"], "graph": "two", "input": graph_input}}
    )
    run_task(task["id"])
    review = ReviewRequest.objects.get(task_id=task["id"])
    body = {"decision": "respond", "response": "already announced"}
    assert api_client(operator).decide(review.id, **body).status_code == 200
    assert run_task(task["id"]) == "succeeded"

    assert task_api.get(task["id"])["result"] == "results: already announced"
    call = ToolCall.objects.get(task_id=task["id"])
    assert (call.status, call.error_class) == ("succeeded", "")
    assert call.result == {"content": "already announced"}


PLAIN_VALUE = (
    "langgraph_graphs:\n"
    '  asks: {graph: "tests.durable.graphs:asks_plain", interrupt_resume: value}\n'
)


def test_interrupt_resume_value_hands_the_graph_the_response_itself(
    task_api, api_client, operator, harness_yaml
):
    harness_yaml(PLAIN_VALUE)
    task = task_api.create({**RELEASE, "agent": {"kind": "langgraph", "graph": "asks"}})
    assert run_task(task["id"]) == "paused"
    review = ReviewRequest.objects.get(task_id=task["id"])
    assert review.interrupt["allowed"] == ["respond", "reject"]
    api = api_client(operator)
    assert api.decide(review.id, decision="approve").status_code == 422  # not offered
    assert api.decide(review.id, decision="respond", response="2.0.0").status_code == 200
    review.refresh_from_db()
    assert review.interrupt["decision"] == "2.0.0"
    assert run_task(task["id"]) == "succeeded"

    assert '"published": "published 2.0.0"' in task_api.get(task["id"])["result"]
    assert ToolCall.objects.get(task_id=task["id"]).status == "succeeded"


def test_interrupt_resume_value_rejected_stops_the_task_and_a_retry_asks_again(
    task_api, api_client, operator, harness_yaml
):
    from checkpoints.recovery import task_retry

    harness_yaml(PLAIN_VALUE)
    task = task_api.create({**RELEASE, "agent": {"kind": "langgraph", "graph": "asks"}})
    run_task(task["id"])
    review = ReviewRequest.objects.get(task_id=task["id"])
    api = api_client(operator)
    assert api.decide(review.id, decision="reject", comment="no release").status_code == 200
    assert run_task(task["id"]) == "failed"
    failed = task_api.get(task["id"])
    assert failed["error_class"] == "interrupt_rejected"
    assert "no release" in failed["error_message"]

    task_retry(task_id=task["id"], user=operator, reason="ask again")
    assert run_task(task["id"]) == "paused"
    again = ReviewRequest.objects.get(task_id=task["id"], status="pending")
    assert api.decide(again.id, decision="respond", response="3.0.0").status_code == 200
    assert run_task(task["id"]) == "succeeded"
    assert '"published": "published 3.0.0"' in task_api.get(task["id"])["result"]


def test_a_rollback_preview_lists_the_tool_calls_it_leaves_in_the_world(
    harness_yaml, task_api, api_client, operator, as_user
):
    """A graph's tools declare no compensation: a rollback restores the graph's state and its
    workspace, and says which tool calls made since the checkpoint it does not undo."""
    from tests.durable.graphs import agent_input

    harness_yaml('langgraph_graphs:\n  adder: "tests.durable.graphs:adder"\n')
    # Two calls in one turn; the second's arguments are no integers: the ToolNode answers it
    # with an error (the call was made all the same).
    task_id = task_api.create(
        graph_spec("adder", agent_input({"a": 1, "b": 2}, {"a": "one", "b": 2}))
    )["id"]
    assert run_task(task_id) == "succeeded"
    api = api_client(operator)
    listed = api.get(f"/api/v1/tasks/{task_id}/graph-checkpoints").json()
    first, head = listed[-1], listed[0]

    def preview(checkpoint: dict) -> dict:
        response = api.get(
            f"/api/v1/tasks/{task_id}/graph-rollback/preview",
            {"checkpoint_id": checkpoint["checkpoint_id"]},
        )
        assert response.status_code == 200, response.content
        return response.json()["calls_not_undone"]

    left = preview(first)
    # In the order the ToolNode reported them (it runs a turn's calls together).
    assert sorted((c["tool"], str(c["arguments"]), c["status"]) for c in left["calls"]) == [
        ("add", str({"a": "one", "b": 2}), "error"),
        ("add", str({"a": 1, "b": 2}), "success"),
    ]
    assert left["more"] == 0
    assert preview(head) == {"calls": [], "more": 0}

    page = as_user(operator).get(
        f"/tasks/{task_id}/graph-checkpoints/{first['checkpoint_id']}/rollback/"
    )
    html = page.content.decode()
    irreversible = html[html.index('data-testid="irreversible"') :]
    assert irreversible.count("<strong>add</strong>") == 2


def test_the_model_calls_of_a_graph_s_nodes_are_its_model_decisions(task_api, api_client, operator):
    task = task_api.create(ANNOUNCE)
    assert run_task(task["id"]) == "paused"
    review = ReviewRequest.objects.get(task_id=task["id"])
    assert api_client(operator).decide(review.id, decision="approve").status_code == 200
    assert run_task(task["id"]) == "succeeded"

    decisions = [
        e.payload
        for e in TaskEvent.objects.filter(task_id=task["id"], type="model_decision").order_by("id")
    ]
    # The agent's model node asked for the tool, then (after the resume) answered.
    assert [(d["turn"], d["node"], d["model"]) for d in decisions] == [
        (1, "model", "scripted-example"),
        (2, "model", "scripted-example"),
    ]
    assert decisions[0]["calls"] == [
        {"tool": "send_announcement", "tool_call_id": "call-1", "args": ANNOUNCEMENT}
    ]
    assert decisions[1]["calls"] == [] and decisions[1]["text"].startswith("done: posted to")
    assert all(d["duration_ms"] > 0 and d["prompt_tokens"] > 0 for d in decisions)
    # On the timeline, a model bar each.
    figure = timeline_of(Task.objects.get(id=task["id"]))
    assert traces(figure)["model calls"]["x"] == pytest.approx(
        [d["duration_ms"] for d in decisions]
    )


def test_a_graph_s_model_tokens_count_against_its_token_budget(task_api):
    task = task_api.create({**ANNOUNCE, "budget": {"max_tokens": 5}})
    assert run_task(task["id"]) == "failed"
    done = Task.objects.get(id=task["id"])
    assert done.error_class == "budget_exceeded" and "max_tokens=5" in done.error_message
    assert done.tokens_used > 5
    assert not ReviewRequest.objects.filter(task_id=task["id"]).exists()  # stopped before


def test_the_review_of_a_graph_interrupt_shows_the_graph_s_conversation(
    task_api, operator, as_user
):
    task = task_api.create(ANNOUNCE)
    assert run_task(task["id"]) == "paused"
    review = ReviewRequest.objects.get(task_id=task["id"])
    page = as_user(operator).get(f"/reviews/{review.id}/").content.decode()
    log = page.partition('data-testid="recent-messages"')[2].partition("</ol>")[0]
    # The user's request, then the model's call of the tool under review.
    assert re.findall(r'class="msg-role-(\w+)"', log) == ["user", "assistant"]
    assert "#general" in log and "send_announcement(" in log
