"""Global checkpoints (two-phase commit over a group) and group rollback, on real workers."""

from __future__ import annotations

import os
import zlib
from typing import Any

import pytest

from checkpoints.models import Checkpoint
from checkpoints.services import checkpoint_raw
from multiagent.models import CheckpointRound, GlobalCheckpoint
from tasks.models import Task
from tests.conftest import page_client
from tests.multiagent.conftest import agent, all_sleeping, delegate, group_spec, stepper

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def group_with_cut(task_api, wait_for) -> tuple[dict, dict]:
    """A parent and two stepping children; an operator takes a global checkpoint while both
    children sleep; the group then runs to the end (the parent writes report.txt)."""
    parent = task_api.create(
        group_spec(
            {"calls": [delegate("left", "step"), delegate("right", "step")]},
            {"call": "write_file", "args": {"path": "report.txt", "content": "both done"}},
            {"final": "reported"},
            agents={"left": stepper("left", 4), "right": stepper("right", 4)},
            tools=["write_file"],
        )
    )
    api = task_api.client
    children = wait_for(
        lambda: (
            len(task_api.get(parent["id"])["children"]) == 2
            and task_api.get(parent["id"])["children"]
        ),
        30,
    )

    wait_for(lambda: all_sleeping(children), 30, message="both children to start sleeping")
    # While children run, the group cannot be rolled back.
    response = api.post(f"/api/v1/tasks/{parent['id']}/global-checkpoints", {"reason": "cut"})
    assert response.status_code == 202, response.content
    round = response.json()
    assert set(round["participants"]) == {parent["id"], *children}

    def committed() -> dict | None:
        state = api.get(f"/api/v1/tasks/{parent['id']}/global-checkpoints/rounds/{round['id']}")
        body = state.json()
        assert body["status"] != "aborted", body
        return body if body["status"] == "committed" else None

    wait_for(committed, 30, message="the round to commit")
    done = task_api.wait(parent["id"], "succeeded", timeout=90)
    cuts = api.get(f"/api/v1/tasks/{parent['id']}/global-checkpoints").json()
    manual = [c for c in cuts if c["trigger"] == "manual"]
    assert len(manual) == 1
    return done, manual[0]


def test_a_global_checkpoint_is_taken_when_every_delegated_child_has_finished(
    fleet, task_api, api_client, viewer
):
    fleet.worker(2)
    done = task_api.run(
        group_spec(
            {"calls": [delegate("a", "x"), delegate("b", "y")]},
            {"final": "ok"},
            agents={"a": agent({"final": "A"}), "b": agent({"final": "B"})},
        ),
        timeout=90,
    )
    cuts = api_client(viewer).get(f"/api/v1/tasks/{done['id']}/global-checkpoints").json()
    assert [(c["seq"], c["trigger"]) for c in cuts] == [(1, "children_finished")]
    participants = {p["task_id"]: p for p in cuts[0]["participants"]}
    assert set(participants) == {done["id"], *done["children"]}
    for task_id, p in participants.items():
        checkpoint = Checkpoint.objects.get(id=p["checkpoint_id"])
        assert str(checkpoint.task_id) == task_id
    assert participants[done["id"]]["status"] == "waiting_children"
    assert {participants[c]["status"] for c in done["children"]} == {"succeeded"}
    # A child's id shows the same group.
    same = api_client(viewer).get(f"/api/v1/tasks/{done['children'][0]}/global-checkpoints")
    assert same.json() == cuts


def test_running_agents_prepare_at_a_step_boundary_and_the_cut_rolls_the_group_back(
    fleet, task_api, wait_for, operator
):
    fleet.worker(3)
    done, cut = group_with_cut(task_api, wait_for)
    children = {c: Task.objects.get(id=c) for c in done["children"]}
    parent = Task.objects.get(id=done["id"])
    for child in children.values():
        assert (child.workspace_path / "a.txt").read_text() == f"{child.agent_name} 2"
        # Prepared at the boundary after its sleep: a local checkpoint of its own.
        local = next(p for p in cut["participants"] if p["task_id"] == str(child.id))
        assert Checkpoint.objects.get(id=local["checkpoint_id"]).trigger == "global_prepare"
    assert (parent.workspace_path / "report.txt").read_text() == "both done"
    # Planted after the cut, as a command would: a link and folders.
    (parent.workspace_path / "link").symlink_to("/etc/passwd")
    (parent.workspace_path / "planted" / "deep").mkdir(parents=True)

    api = task_api.client
    preview = api.get(
        f"/api/v1/tasks/{parent.id}/group-rollback/preview",
        {"global_checkpoint_id": cut["id"]},
    ).json()
    assert preview["allowed"] is True
    rows = {p["task_id"]: p for p in preview["participants"]}
    assert rows[str(parent.id)]["files_delete"] == ["report.txt"]
    assert rows[str(parent.id)]["links_delete"] == ["link"]
    assert rows[str(parent.id)]["folders_delete"] == ["planted", "planted/deep"]
    assert "write_file" in [c["tool"] for c in rows[str(parent.id)]["calls_undone"]]
    assert all(rows[c]["files_restore"] == ["a.txt"] for c in children)
    page = page_client(operator).get(
        f"/tasks/{parent.id}/group-rollback/", {"global_checkpoint_id": cut["id"]}
    )
    assert "report.txt link planted/ planted/deep/" in page.content.decode()

    response = api.post(
        f"/api/v1/tasks/{parent.id}/group-rollback",
        {"global_checkpoint_id": cut["id"], "resume": False, "reason": "redo the second half"},
    )
    assert response.status_code == 200, response.content
    for child in children.values():
        assert (child.workspace_path / "a.txt").read_text() == f"{child.agent_name} 1"
    assert not (parent.workspace_path / "report.txt").exists()
    assert sorted(os.listdir(parent.workspace_path)) == []
    statuses = {t.id: t.status for t in Task.objects.filter(id__in=[parent.id, *children])}
    assert set(statuses.values()) == {"held"}
    for task_id in [*children, parent.id]:
        assert api.post(f"/api/v1/tasks/{task_id}/resume", {"reason": "go"}).status_code == 200
    again = task_api.wait(str(parent.id), "succeeded", timeout=90)
    # The same children finished again; no new ones were started.
    assert sorted(again["children"]) == sorted(done["children"])
    for child in children.values():
        assert (child.workspace_path / "a.txt").read_text() == f"{child.agent_name} 2"
    assert (parent.workspace_path / "report.txt").read_text() == "both done"


def _group_state(root_id: str) -> dict[str, Any]:
    tasks = Task.objects.filter(id=root_id) | Task.objects.filter(parent_id=root_id)
    return {
        str(t.id): (
            t.status,
            t.head_checkpoint_id,
            Checkpoint.objects.filter(task=t).count(),
            sorted(
                (p.relative_to(t.workspace_path).as_posix(), p.read_bytes())
                for p in t.workspace_path.rglob("*")
                if p.is_file()
            )
            if t.workspace_path.is_dir()
            else None,
        )
        for t in tasks
    }


def test_a_participant_that_cannot_be_restored_leaves_the_whole_group_unchanged(
    fleet, task_api, wait_for
):
    fleet.worker(3)
    done, cut = group_with_cut(task_api, wait_for)
    api = task_api.client
    # One child's local checkpoint in the cut is corrupted: refused before anything changes.
    victim = Checkpoint.objects.get(id=cut["participants"][-1]["checkpoint_id"])
    Checkpoint.objects.filter(pk=victim.pk).update(
        payload=zlib.compress(checkpoint_raw(victim.payload).replace(b"messages", b"messagez"))
    )
    before = _group_state(done["id"])
    response = api.post(
        f"/api/v1/tasks/{done['id']}/group-rollback",
        {"global_checkpoint_id": cut["id"], "resume": False, "reason": "try"},
    )
    assert response.status_code == 422, response.content
    assert response.json()["errors"][0]["field"] == "global_checkpoint_id"
    assert _group_state(done["id"]) == before
    Checkpoint.objects.filter(pk=victim.pk).update(payload=victim.payload)

    # One workspace cannot be written (a file stands where its directory was): the
    # workspaces restored before it are put back, and nothing in the database changes.
    last = Task.objects.get(id=cut["participants"][-1]["task_id"])
    moved = last.workspace_path.with_name(last.workspace_path.name + ".bak")
    last.workspace_path.rename(moved)
    last.workspace_path.write_text("not a directory")
    before = _group_state(done["id"])
    response = api.post(
        f"/api/v1/tasks/{done['id']}/group-rollback",
        {"global_checkpoint_id": cut["id"], "resume": False, "reason": "try again"},
    )
    assert response.status_code == 409, response.content
    assert "nothing was changed" in response.json()["detail"]
    assert _group_state(done["id"]) == before
    assert not GlobalCheckpoint.objects.filter(superseded=True).exists()


def test_group_rollback_is_refused_while_a_participant_runs(fleet, task_api, wait_for):
    fleet.worker(2)
    parent = task_api.create(
        group_spec(
            {"call": "delegate", "args": {"agent": "slow", "goal": "wait"}},
            {"final": "ok"},
            agents={
                "slow": agent(
                    {"call": "sleep", "args": {"seconds": 3}}, {"final": "x"}, tools=["sleep"]
                ),
            },
        )
    )
    wait_for(lambda: task_api.get(parent["id"])["children"], 30)
    child = task_api.get(parent["id"])["children"][0]
    task_api.wait(child, "running")
    round = CheckpointRound.objects.create(
        root_id=parent["id"],
        trigger="manual",
        participants=[],
        deadline="2000-01-01T00:00:00Z",
        status="committed",
    )
    cut = GlobalCheckpoint.objects.create(
        root_id=parent["id"],
        seq=1,
        round=round,
        trigger="manual",
        participants=[],
        created_at=round.created_at,
    )
    response = task_api.client.post(
        f"/api/v1/tasks/{parent['id']}/group-rollback",
        {"global_checkpoint_id": str(cut.id), "resume": True, "reason": "no"},
    )
    assert response.status_code == 409, response.content
    missing = task_api.client.post(
        f"/api/v1/tasks/{parent['id']}/group-rollback",
        {"global_checkpoint_id": str(cut.id), "resume": True},
    )
    assert missing.status_code == 422
    assert missing.json()["errors"][0]["field"].endswith("reason")
    task_api.wait(parent["id"], "succeeded", timeout=60)
