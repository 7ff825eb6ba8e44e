"""The recovery API: rollback (+ preview), retry, resume, recover, plan and diff."""

from __future__ import annotations

import uuid

import pytest

from checkpoints.models import Checkpoint
from tasks.models import Task
from tests.checkpoints.conftest import checkpoint_after_step, files_of

pytestmark = pytest.mark.django_db(transaction=True)


def test_preview_then_rollback_over_the_api(finished, api_client, operator):
    client = api_client(operator)
    target = checkpoint_after_step(finished, 1)
    base = f"/api/v1/tasks/{finished.id}"

    preview = client.get(f"{base}/rollback/preview", {"checkpoint_id": str(target.id)})
    assert preview.status_code == 200, preview.content
    body = preview.json()
    assert body["allowed"] and body["files_restore"] == ["app.conf"]
    assert body["files_delete"] == ["new.txt"]
    assert [c["tool"] for c in body["calls_undone"]] == ["write_file"] * 3

    response = client.post(
        f"{base}/rollback", {"checkpoint_id": str(target.id), "resume": False, "reason": "bad v2"}
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["task"]["status"] == "held"
    assert body["checkpoint"]["trigger"] == "rollback"
    assert body["checkpoint"]["parent_id"] == str(target.id)
    assert body["task"]["head_checkpoint"] == body["checkpoint"]["id"]
    assert body["files_restored"] == ["app.conf"] and body["files_deleted"] == ["new.txt"]
    assert files_of(finished.workspace_path) == {"app.conf": b"version = 1\n"}

    listed = client.get(f"{base}/checkpoints").json()
    assert [c["superseded"] for c in listed if c["seq"] > target.seq][:-1] == [True] * (
        len(listed) - target.seq - 1
    )

    resumed = client.post(f"{base}/resume", {"reason": "go"})
    assert resumed.status_code == 200 and resumed.json()["status"] == "queued"


def test_rollback_input_errors_and_permissions(finished, api_client, operator, viewer):
    target = checkpoint_after_step(finished, 1)
    url = f"/api/v1/tasks/{finished.id}/rollback"
    operator_client = api_client(operator)
    no_reason = operator_client.post(url, {"checkpoint_id": str(target.id), "resume": False})
    assert no_reason.status_code == 422
    assert any(e["field"] == "reason" for e in no_reason.json()["errors"])
    unknown = operator_client.post(url, {"checkpoint_id": str(uuid.uuid4()), "reason": "x"})
    assert unknown.status_code == 404
    assert (
        api_client(viewer).post(url, {"checkpoint_id": str(target.id), "reason": "x"}).status_code
        == 403
    )
    assert (
        api_client(viewer)
        .get(f"/api/v1/tasks/{finished.id}/rollback/preview", {"checkpoint_id": str(target.id)})
        .status_code
        == 200
    )
    Task.objects.filter(id=finished.id).update(status="running")
    running = operator_client.post(url, {"checkpoint_id": str(target.id), "reason": "x"})
    assert running.status_code == 409 and "running" in running.json()["detail"]
    assert operator_client.post(f"/api/v1/tasks/{finished.id}/retry").status_code == 409
    assert operator_client.post(f"/api/v1/tasks/{finished.id}/resume").status_code == 409


def test_retry_and_resume_refuse_a_succeeded_task(finished, api_client, operator):
    client = api_client(operator)
    assert client.post(f"/api/v1/tasks/{finished.id}/retry").status_code == 409
    assert client.post(f"/api/v1/tasks/{finished.id}/resume").status_code == 409


def test_recover_auto_rolls_back_a_failed_write_step_to_its_start(
    make_task, run_inline, api_client, operator
):
    from tasks.models import ToolCall

    task = make_task(
        {
            "title": "t",
            "goal": "g",
            "tools": ["write_file"],
            "model": {
                "kind": "scripted",
                "script": [
                    {"call": "write_file", "args": {"path": "a.txt", "content": "1"}},
                    {"call": "write_file", "args": {"path": "b.txt", "content": "2"}},
                ],
            },
        },
        user=operator,
    )
    assert run_inline(task) == "failed"  # the script ran out
    # Pretend the last write failed, as a crashed disk would have it.
    ToolCall.objects.filter(task=task, arguments__path="b.txt").update(status="failed")
    client = api_client(operator)
    plan = client.get(f"/api/v1/tasks/{task.id}/recovery-plan").json()
    assert plan["strategy"] == "rollback" and "write_file's default" in plan["why"]
    start = Checkpoint.objects.get(id=plan["checkpoint_id"])
    assert start.step_index == 1 and start.trigger == "after_step"

    response = client.post(
        f"/api/v1/tasks/{task.id}/recover",
        {"strategy": "auto", "resume": False, "reason": "disk error"},
    )
    assert response.status_code == 200, response.content
    assert response.json()["kind"] == "rollback"
    assert response.json()["files_deleted"] == ["b.txt"]
    assert files_of(task.workspace_path) == {"a.txt": b"1"}


def test_the_task_spec_overrides_a_tools_default_strategy(make_task, run_inline, operator):
    from checkpoints.selectors import recovery_plan
    from tasks.models import ToolCall

    task = make_task(
        {
            "title": "t",
            "goal": "g",
            "tools": ["write_file"],
            "recovery": {"write_file": "retry"},
            "model": {
                "kind": "scripted",
                "script": [{"call": "write_file", "args": {"path": "a.txt", "content": "1"}}],
            },
        },
        user=operator,
    )
    run_inline(task)
    ToolCall.objects.filter(task=task).update(status="failed")
    plan = recovery_plan(task=task)
    assert plan.strategy == "retry" and "recovery setting" in plan.why


def test_diff_of_two_checkpoints_over_the_api(finished, api_client, viewer):
    a = checkpoint_after_step(finished, 1)
    b = checkpoint_after_step(finished, 4)
    response = api_client(viewer).get(
        f"/api/v1/tasks/{finished.id}/checkpoints/diff", {"a": str(a.id), "b": str(b.id)}
    )
    assert response.status_code == 200, response.content
    body = response.json()
    files = {f["path"]: f for f in body["files"]}
    assert files["new.txt"]["change"] == "added"
    assert files["app.conf"]["change"] == "changed"
    assert "-version = 1" in files["app.conf"]["text_diff"]
    assert "+version = 3" in files["app.conf"]["text_diff"]
    state = {c["field"]: c for c in body["state"]}
    assert state["step_index"]["a"] == 1 and state["step_index"]["b"] == 4
    assert len(body["messages"]["only_b"]) > 0
