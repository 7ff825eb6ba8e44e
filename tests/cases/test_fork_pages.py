"""Fork and adopt from the browser (issue #31 item 5): an operator opens a checkpoint's "Fork…"
form, edits the pending call's arguments, starts the sibling, finds the family of forks on both
task pages, compares them step by step and adopts the fork into the original. Plus the form's
refusals (nothing is created) and who may use it."""

from __future__ import annotations

import json

import pytest

from checkpoints.models import Checkpoint
from tasks.agent_state import AgentState, Message, ProposedCall
from tasks.models import AuditEntry, Task, ToolCall
from tests.cases.conftest import waiting_spec
from tests.conftest import needs_chromium, wait_for
from tests.factories import TaskFactory, scripted_spec

SLOW_MS = 60_000


@pytest.mark.integration
@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
@needs_chromium
def test_operator_forks_a_waiting_task_with_an_edited_call_and_adopts_it(
    live_server, open_page, workers, task_api, operator
):
    original = task_api.create(waiting_spec())
    waiting = task_api.wait(original["id"], "waiting_review")
    head = Checkpoint.objects.get(id=waiting["head_checkpoint"])
    before = list(ToolCall.objects.filter(task_id=original["id"]).values_list("call_id", "status"))

    page = open_page(operator, f"/tasks/{original['id']}/?tab=checkpoints", timeout_ms=SLOW_MS)
    page.click(f"[data-testid=fork-link-{head.seq}]")
    page.wait_for_selector("[data-testid=fork-form]")
    shown = json.loads(page.input_value("[data-testid=fork-pending-0]"))
    assert shown == {"path": "cfg/app.conf", "content": "x=1\n"}
    page.fill(
        "[data-testid=fork-pending-0]", json.dumps({"path": "notes/b.md", "content": "edited\n"})
    )
    page.fill("[data-testid=fork-reason]", "try b")
    page.click("[data-testid=fork-confirm]")

    # The sibling's page: forked from the original, which its family lists.
    page.wait_for_selector("[data-testid=fork-of]")
    sibling_id = page.url.rstrip("/").rsplit("/", 1)[-1]
    assert sibling_id != original["id"]
    sibling = task_api.wait(sibling_id, "succeeded")
    assert sibling["fork_of_id"] == original["id"]
    sibling_ws = Task.objects.get(id=sibling_id).workspace_path
    assert (sibling_ws / "a.md").read_text() == "a\n"
    assert (sibling_ws / "notes" / "b.md").read_text() == "edited\n"
    # The original is untouched: still waiting, its ledger as it was.
    assert task_api.get(original["id"])["status"] == "waiting_review"
    after = list(ToolCall.objects.filter(task_id=original["id"]).values_list("call_id", "status"))
    assert after == before

    page.reload()
    family = page.inner_text("[data-testid=task-family]")
    assert "forked from" in family and "this task" in family

    # Compare step by step: the first divergent step is the edited call's.
    page.click("[data-testid=family-compare]")
    page.wait_for_selector("[data-testid=compare-steps]")
    assert page.inner_text("[data-testid=first-divergent-step]") == "2"
    assert "notes/b.md" in page.inner_text("[data-testid=compare-files]")

    # Adopt the branch, from the fork's own page: the original rolls forward and finishes.
    page.goto(f"{live_server.url}/tasks/{sibling_id}/")
    page.click("[data-testid=family-adopt] summary")
    page.fill("[data-testid=adopt-reason]", "b wins")
    page.click("[data-testid=adopt-confirm]")
    page.wait_for_url(f"{live_server.url}/tasks/{original['id']}/")
    assert "Adopted the branch" in page.inner_text(".messages")
    done = task_api.wait(original["id"], "succeeded")
    assert done["result"] == "done"
    workspace = Task.objects.get(id=original["id"]).workspace_path
    assert (workspace / "notes" / "b.md").read_text() == "edited\n"
    assert not (workspace / "cfg" / "app.conf").exists()
    assert AuditEntry.objects.get(action="adopt", task_id=original["id"]).reason == "b wins"
    wait_for(
        lambda: AuditEntry.objects.filter(action="task_fork", task_id=original["id"]).exists(),
        5,
        message="the fork's audit entry",
    )


# --- the form without a browser ----------------------------------------------------------------


def _waiting_task(**fields):
    """A task whose head checkpoint has a system prompt, a user message and one pending call."""
    spec = scripted_spec([{"call": "write_file", "args": {"path": "x.conf"}}], ["write_file"])
    task = TaskFactory(status="waiting_review", spec=spec, **fields)
    state = AgentState(
        messages=[
            Message(role="system", content="be careful"),
            Message(role="user", content="write the config\nplease"),
            Message(
                role="assistant",
                calls=[ProposedCall(call_id="0.1.0", tool="write_file", args={"path": "x.conf"})],
            ),
        ],
        phase="tools",
        pending=[ProposedCall(call_id="0.1.0", tool="write_file", args={"path": "x.conf"})],
        turn_index=1,
    )
    from checkpoints.services import checkpoint_build

    checkpoint = checkpoint_build(
        task_id=task.id, seq=1, state=state, level="step", trigger="before_review"
    )
    checkpoint.save(force_insert=True)
    Task.objects.filter(id=task.id).update(head_checkpoint_id=checkpoint.id)
    return task, checkpoint


def _form(client, task, checkpoint) -> dict[str, str]:
    """The form's fields as the page prefills them (what an untouched submit sends)."""
    import re
    from html import unescape

    page = client.get(f"/tasks/{task.id}/checkpoints/{checkpoint.id}/fork/")
    assert page.status_code == 200
    html = page.content.decode()
    fields = {
        name: unescape(value).removeprefix("\n")
        for name, value in re.findall(r'<textarea name="([^"]+)"[^>]*>(.*?)</textarea>', html, re.S)
    }
    fields.update(re.findall(r'<input name="([^"]+)" value="([^"]*)"', html))
    return fields


def test_the_form_shows_the_state_and_an_untouched_submit_forks_it_unchanged(
    as_user, operator, django_capture_on_commit_callbacks
):
    task, checkpoint = _waiting_task()
    client = as_user(operator)
    fields = _form(client, task, checkpoint)
    assert fields["message-0"] == "be careful"
    assert fields["message-1"] == "write the config\nplease"
    assert json.loads(fields["pending-0.1.0"]) == {"path": "x.conf"}
    # A browser sends a textarea's line ends as CRLF: still unchanged.
    fields["message-1"] = fields["message-1"].replace("\n", "\r\n")
    with django_capture_on_commit_callbacks():
        response = client.post(f"/tasks/{task.id}/checkpoints/{checkpoint.id}/fork/", fields)
    assert response.status_code == 302, response.content.decode()[-3000:]
    sibling = Task.objects.get(fork_of=task)
    assert response.status_code == 302 and response["Location"] == f"/tasks/{sibling.id}/"
    fork_event = sibling.events.get(type="fork")
    assert "edits" not in fork_event.payload or fork_event.payload["edits"] == {}
    assert sibling.spec["budget"] == task.spec.get("budget", sibling.spec["budget"])


def test_an_assistant_message_of_tool_calls_reads_as_the_calls_a_pending_one_editable(
    as_user, operator
):
    """Issue #45 item 7: not an empty text area: the call's tool and arguments, and the pending
    call's arguments edited in place (once: no second field for it elsewhere)."""
    task, checkpoint = _waiting_task()
    html = as_user(operator).get(f"/tasks/{task.id}/checkpoints/{checkpoint.id}/fork/")
    html = html.content.decode()
    assert 'name="message-2"' not in html  # the calls' message had no text
    call = html.split('data-testid="fork-call-2-0"')[1].split("</div>")[0]
    assert "<code>write_file</code>" in call and "pending" in call
    assert 'name="pending-0.1.0"' in call and "&quot;x.conf&quot;" in call
    assert html.count('name="pending-0.1.0"') == 1


def test_edits_reach_the_sibling_and_only_they(
    as_user, operator, django_capture_on_commit_callbacks
):
    task, checkpoint = _waiting_task()
    client = as_user(operator)
    fields = _form(client, task, checkpoint)
    fields.update(
        {
            "message-0": "be bold",
            "pending-0.1.0": '{"path": "y.conf", "content": "z"}',
            "max_steps": "7",
        }
    )
    with django_capture_on_commit_callbacks():
        client.post(f"/tasks/{task.id}/checkpoints/{checkpoint.id}/fork/", fields)
    sibling = Task.objects.get(fork_of=task)
    edits = sibling.events.get(type="fork").payload["edits"]
    assert edits == {
        "system_prompt": "be bold",
        "pending_args": {"0.1.0": {"path": "y.conf", "content": "z"}},
        "budget": {"max_steps": 7},
    }
    assert sibling.spec["budget"]["max_steps"] == 7


@pytest.mark.parametrize(
    ("field", "value", "named"),
    [
        ("pending-0.1.0", "{not json", "pending-0.1.0"),
        ("pending-0.1.0", "[1, 2]", "pending-0.1.0"),
        ("max_steps", "0", "budget.max_steps"),
        ("turn_timeout_s", "soon", "budget.turn_timeout_s"),
        ("message-1", "x" * 200_001, "messages.0.content"),
    ],
)
def test_a_bad_field_is_named_and_nothing_is_created(as_user, operator, field, value, named):
    task, checkpoint = _waiting_task()
    client = as_user(operator)
    fields = _form(client, task, checkpoint)
    fields[field] = value
    response = client.post(f"/tasks/{task.id}/checkpoints/{checkpoint.id}/fork/", fields)
    assert response.status_code == 422
    assert f"<strong>{named}</strong>" in response.content.decode()
    assert not Task.objects.filter(fork_of=task).exists()
    # What the operator typed is kept in the form.
    assert "x" * 50 in response.content.decode() or field != "message-1"


def test_viewers_cannot_fork_or_adopt(as_user, viewer):
    task, checkpoint = _waiting_task()
    client = as_user(viewer)
    assert client.get(f"/tasks/{task.id}/checkpoints/{checkpoint.id}/fork/").status_code == 403
    fork = TaskFactory(status="succeeded", fork_of=task)
    response = client.post(f"/tasks/{task.id}/adopt/", {"sibling_id": fork.id, "reason": "x"})
    assert response.status_code == 403
    assert not AuditEntry.objects.filter(action="adopt").exists()


def test_adopting_a_task_that_is_not_a_fork_of_it_is_refused(as_user, operator):
    task, _ = _waiting_task()
    stranger = TaskFactory(status="succeeded")
    response = as_user(operator).post(
        f"/tasks/{task.id}/adopt/", {"sibling_id": stranger.id, "reason": "x"}, follow=True
    )
    assert "sibling_id: not a fork of this task" in response.content.decode()
    assert Task.objects.get(id=task.id).status == "waiting_review"


def test_the_family_lists_original_siblings_and_own_forks(as_user, viewer):
    root = TaskFactory(status="succeeded", title="root")
    fork = TaskFactory(status="succeeded", title="fork one", fork_of=root)
    sibling = TaskFactory(status="failed", title="fork two", fork_of=root)
    grandchild = TaskFactory(status="queued", title="fork of fork", fork_of=fork)
    lonely = TaskFactory(status="succeeded", title="lonely")
    client = as_user(viewer)

    page = client.get(f"/tasks/{fork.id}/").content.decode()
    for title in ("root", "fork two", "fork of fork"):
        assert title in page
    assert page.count('data-testid="family-member"') == 4
    # Viewers compare but do not adopt.
    assert 'data-testid="family-compare"' in page and "family-adopt" not in page
    assert 'data-testid="task-family"' not in client.get(f"/tasks/{lonely.id}/").content.decode()
    compare = client.get(f"/tasks/{root.id}/compare/", {"other": sibling.id})
    assert compare.status_code == 200
    assert client.get(f"/tasks/{root.id}/compare/", {"other": "nope"}).status_code == 404
    assert grandchild.fork_of_id == fork.id


def test_a_fork_cannot_be_saved_as_a_case(as_user, operator):
    """A fork starts mid-run from its original's checkpoint: a replay, which starts from the
    spec, could not follow its recording. Refused with the reason; no button offered."""
    from cases.models import Case

    root = TaskFactory(status="succeeded", title="root")
    fork = TaskFactory(status="succeeded", title="fork", fork_of=root)
    client = as_user(operator)
    assert 'data-testid="save-case"' not in client.get(f"/tasks/{fork.id}/").content.decode()
    response = client.post(f"/api/v1/tasks/{fork.id}/save-case", {"name": "f"}, "application/json")
    assert response.status_code == 409, response.content
    assert "a fork cannot be saved" in response.content.decode()
    assert not Case.objects.exists()
