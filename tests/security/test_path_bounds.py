"""Absurd workspace file names and paths are refused where they are given — a task spec (422
naming the field and the path) or a tool call (a compact error to the model) — never accepted
to fail later with `OSError: File name too long`."""

from __future__ import annotations

import pytest

from tasks.models import Task, ToolCall
from tests.factories import run_in_process, scripted_spec, spec_task

pytestmark = pytest.mark.django_db


def _spec(files: dict[str, str]) -> dict:
    return scripted_spec([{"final": "done"}], [], workspace={"files": files})


def _errors(response) -> list[dict]:
    return response.json()["errors"]


@pytest.mark.parametrize(
    "name, says",
    [
        ("a" * 5000, "5000 bytes long"),
        ("é" * 128, "256 bytes long; a file or folder name may be at most 255"),
        ("d/" * 32 + "f.txt", "33 levels deep"),
        ("/".join(["x" * 200] * 6), "1205 bytes long; a path may be at most 1024"),
        ("bad\udc80name", "not valid UTF-8"),
    ],
)
def test_an_absurd_workspace_file_name_is_422_naming_the_path(api_client, operator, name, says):
    response = api_client(operator).post("/api/v1/tasks", _spec({name: "x"}))

    assert response.status_code == 422, response.content
    [error] = _errors(response)
    assert error["field"].endswith("workspace.files")
    assert says in error["message"]
    assert repr(name[:20])[1:-1] in error["message"] and len(error["message"]) < 400
    assert not Task.objects.exists()


def test_names_at_the_bounds_are_accepted_and_written(operator):
    longest = "é" * 127 + "x"  # 255 bytes
    deep = "d/" * 31 + "f.txt"  # 32 levels
    task = spec_task(_spec({longest: "a", deep: "b"}), user=operator)

    assert run_in_process(task) == "succeeded"
    assert (task.workspace_path / longest).read_text() == "a"
    assert (task.workspace_path / deep).read_text() == "b"


def test_too_many_workspace_files_is_422(api_client, operator):
    response = api_client(operator).post(
        "/api/v1/tasks", _spec({f"f{i}.txt": "" for i in range(1001)})
    )

    assert response.status_code == 422
    assert _errors(response)[0]["field"].endswith("workspace.files")
    assert "at most 1000 files" in _errors(response)[0]["message"]


def test_a_tool_call_naming_an_absurd_path_is_told_compactly(operator, settings, harness_yaml):
    harness_yaml("review_rules: []\n")
    name = "n" * 5000
    task = spec_task(
        scripted_spec(
            [
                {"call": "write_file", "args": {"path": name, "content": "x"}},
                {"call": "read_file", "args": {"path": f"{'d/' * 40}f"}},
                {"final": "done"},
            ],
            ["write_file", "read_file"],
        ),
        user=operator,
    )

    assert run_in_process(task) == "succeeded"
    write, read = ToolCall.objects.filter(task=task).order_by("id")
    assert write.status == read.status == "failed"
    assert write.error_class == read.error_class == "invalid_arguments"
    assert "5000 bytes long" in write.error_message and "41 levels deep" in read.error_message
    feedback = write.result["observation"]
    assert len(feedback) < 1000 and name not in feedback
    assert list(task.workspace_path.iterdir()) == []
