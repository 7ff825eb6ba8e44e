"""The shared directory of a group (TaskSpec `shared`), on real workers: every agent writes it,
a global checkpoint records its snapshot, and a group rollback restores it with the
workspaces, all or nothing."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from multiagent.models import GlobalCheckpoint
from multiagent.shared import shared_path, shared_write_lock
from tasks.models import Task
from tests.conftest import run_in_threads
from tests.durable.conftest import TEST_CONFIG
from tests.multiagent.conftest import agent, delegate, group_spec

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def harness_config_text() -> str:
    return TEST_CONFIG + "review_rules:\n  - {name: commands, tool: run_command, action: allow}\n"


def _files(path: Path) -> dict[str, str]:
    return {
        p.relative_to(path).as_posix(): p.read_text()
        for p in sorted(path.rglob("*"))
        if p.is_file()
    }


def writer(name: str, *extra: dict, tools: tuple[str, ...] = ()) -> dict:
    return agent(
        {"call": "write_file", "args": {"path": f"/shared/{name}.txt", "content": f"{name} 1"}},
        {"call": "append_file", "args": {"path": "/shared/log.txt", "content": f"{name}\n"}},
        *extra,
        {"final": f"{name} done"},
        tools=["write_file", "append_file", *tools],
    )


def test_children_share_a_directory_and_group_rollback_restores_it_to_the_cut(
    fleet, task_api, wait_for
):
    fleet.worker(3)
    done = task_api.run(
        group_spec(
            {"calls": [delegate("left", "write"), delegate("right", "write")]},
            {"call": "read_file", "args": {"path": "/shared/log.txt"}},
            {"call": "write_file", "args": {"path": "/shared/left.txt", "content": "parent"}},
            {"call": "write_file", "args": {"path": "/shared/report.txt", "content": "done"}},
            {"final": "reported"},
            agents={
                "left": writer("left"),
                "right": writer(
                    "right",
                    {"call": "run_command", "args": {"command": "cat /shared/right.txt"}},
                    tools=("run_command",),
                ),
            },
            tools=["read_file", "write_file"],
            shared=True,
        ),
        timeout=120,
    )
    shared = shared_path(root_id=done["id"])
    after = _files(shared)
    assert after["left.txt"] == "parent" and after["report.txt"] == "done"
    assert sorted(after["log.txt"].splitlines()) == ["left", "right"]
    right = Task.objects.get(parent_id=done["id"], agent_name="right")
    # The command saw the same directory at /shared.
    ran = right.tool_calls.get(tool="run_command")
    assert ran.result["stdout"] == "right 1"
    # No agent's own workspace holds the shared files.
    assert not list(right.workspace_path.rglob("*.txt"))

    api = task_api.client
    cuts = api.get(f"/api/v1/tasks/{done['id']}/global-checkpoints").json()
    cut = next(c for c in cuts if c["trigger"] == "children_finished")
    assert cut["shared_snapshot"]["files"] == 3
    preview = api.get(
        f"/api/v1/tasks/{done['id']}/group-rollback/preview",
        {"global_checkpoint_id": cut["id"]},
    ).json()
    assert preview["shared"] == {
        "files_restore": ["left.txt"],
        "files_delete": ["report.txt"],
        "links_delete": [],
        "folders_delete": [],
    }

    # A participant's workspace cannot be written: the shared directory, restored first, is
    # put back with everything else.
    left = Task.objects.get(parent_id=done["id"], agent_name="left")
    moved = left.workspace_path.with_name(left.workspace_path.name + ".bak")
    left.workspace_path.rename(moved)
    left.workspace_path.write_text("not a directory")
    response = api.post(
        f"/api/v1/tasks/{done['id']}/group-rollback",
        {"global_checkpoint_id": cut["id"], "resume": False, "reason": "try"},
    )
    assert response.status_code == 409, response.content
    assert _files(shared) == after
    left.workspace_path.unlink()
    moved.rename(left.workspace_path)

    response = api.post(
        f"/api/v1/tasks/{done['id']}/group-rollback",
        {"global_checkpoint_id": cut["id"], "resume": False, "reason": "redo the report"},
    )
    assert response.status_code == 200, response.content
    restored = _files(shared)
    assert restored == {
        **{k: v for k, v in after.items() if k != "report.txt"},
        "left.txt": "left 1",
    }
    assert Task.objects.get(id=done["id"]).status == "held"


def test_a_group_without_shared_records_no_shared_snapshot(fleet, task_api):
    fleet.worker(2)
    done = task_api.run(
        group_spec(
            delegate("a", "x"),
            {"call": "write_file", "args": {"path": "/shared/x.txt", "content": "x"}},
            {"final": "ok"},
            agents={"a": agent({"final": "A"})},
            tools=["write_file"],
        ),
        timeout=90,
    )
    assert GlobalCheckpoint.objects.get(root_id=done["id"]).shared_snapshot is None
    refused = Task.objects.get(id=done["id"]).tool_calls.get(tool="write_file")
    assert "no shared directory" in refused.error_message
    assert not shared_path(root_id=done["id"]).exists()


def test_shared_needs_agents(api_client, operator):
    response = api_client(operator).post(
        "/api/v1/tasks",
        {
            "title": "t",
            "goal": "g",
            "model": {"kind": "scripted", "script": [{"final": "x"}]},
            "shared": True,
        },
    )
    assert response.status_code == 422
    assert "shared" in response.content.decode()


def test_writes_to_one_shared_path_wait_for_each_other(tmp_path):
    directory = tmp_path / "shared" / "root"
    directory.mkdir(parents=True)
    order: list[str] = []
    holding = threading.Event()

    def first() -> None:
        with shared_write_lock(directory=directory, path="notes.txt"):
            holding.set()
            time.sleep(0.3)  # room for the second writer to get in, were the lock broken
            order.append("first released")

    def second() -> None:
        holding.wait(10)
        # Another spelling of the same path takes the same lock.
        with shared_write_lock(directory=directory, path="./notes.txt"):
            order.append("second wrote")

    run_in_threads(first, second, timeout=30)
    assert order == ["first released", "second wrote"]
    # Another path is not held up by it.
    with shared_write_lock(directory=directory, path="other.txt"):
        pass
