"""The New task page (issue #45 item 3): a creator starts a task with uploaded and pasted files
through the API's validation; errors are shown beside the input of the field the API names,
and a refused form (hostile files included) keeps everything that was given and starts
nothing; a spec is saved as a template from the page and from a task's page."""

from __future__ import annotations

import json
import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from dashboard.new_task_files import UPLOAD_MAX_FILES
from tasks.models import Task, TaskTemplate
from tasks.web.uploads import UPLOAD_FILE_MAX_BYTES
from tests.conftest import ApiClient, page_client
from tests.factories import scripted_spec

pytestmark = pytest.mark.django_db

SCRIPT = [{"call": "read_file", "args": {"path": "in.txt"}}, {"final": "ok"}]


def form(**extra) -> dict:
    data = {
        "title": "Summarise",
        "goal": "Read in.txt",
        "priority": "high",
        "agent": "loop",
        "model_kind": "scripted",
        "model_script": json.dumps(SCRIPT),
        "tools": ["read_file"],
        "file_path": ["in.txt", ""],
        "file_content": ["one\r\n", ""],
        "action": "start",
    }
    data.update(extra)
    return data


def errors_at(response, place: str) -> str:
    match = re.search(rf'data-testid="error-{place}">(.*?)</ul>', response.content.decode(), re.S)
    return match.group(1) if match else ""


def test_the_nav_offers_new_task_to_those_who_may_create(creator, viewer, operator):
    for user, shown in ((creator, True), (operator, True), (viewer, False)):
        page = page_client(user).get("/tasks/")
        assert ('data-testid="nav-new-task"' in page.content.decode()) is shown
    assert page_client(viewer).get("/tasks/new/").status_code == 403


def test_the_page_lists_the_tools_with_their_risk_and_the_registered_agents(creator):
    page = page_client(creator).get("/tasks/new/").content.decode()
    assert 'value="write_file"' in page and "risk-write" in page
    assert 'value="langgraph:release_bot"' in page  # harness.yaml langgraph_graphs


def test_a_creator_starts_a_task_with_a_pasted_and_an_uploaded_file(creator):
    upload = SimpleUploadedFile("data.csv", b"a,b\n1,2\n", content_type="text/csv")
    response = page_client(creator).post(
        "/tasks/new/", form(upload=[upload], upload_folder="inputs")
    )
    task = Task.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/tasks/{task.id}/"
    assert task.created_by == creator and task.status == "queued" and task.priority == "high"
    assert task.spec["workspace"]["files"] == {"in.txt": "one\n", "inputs/data.csv": "a,b\n1,2\n"}
    assert task.spec["model"]["kind"] == "scripted"
    assert [turn.get("call") or turn["final"] for turn in task.spec["model"]["script"]] == [
        "read_file",
        "ok",
    ]
    assert task.spec["tools"] == ["read_file"]


def test_an_error_is_shown_beside_its_field_named_as_the_api_names_it(creator):
    bad = {"budget_max_steps": "0", "budget_tool_timeout_s": "abc"}
    response = page_client(creator).post("/tasks/new/", form(**bad))
    assert response.status_code == 422
    assert "budget.max_steps" in errors_at(response, "budget_max_steps")
    assert "budget.tool_timeout_s" in errors_at(response, "budget_tool_timeout_s")
    api = ApiClient(creator).post(
        "/api/v1/tasks",
        {
            **scripted_spec(SCRIPT, ["read_file"]),
            "budget": {"max_steps": 0, "tool_timeout_s": "abc"},
        },
    )
    assert {e["field"] for e in api.json()["errors"]} == {
        "budget.max_steps",
        "budget.tool_timeout_s",
    }
    # Everything given is there to fix and send again.
    page = response.content.decode()
    assert 'value="Summarise"' in page and "Read in.txt" in page and 'value="in.txt"' in page
    assert not Task.objects.exists()


def test_a_check_beyond_the_schema_is_shown_beside_its_field(creator):
    response = page_client(creator).post(
        "/tasks/new/", form(tools=["read_file"], tools_more="launch")
    )
    assert response.status_code == 422
    assert "tools.1" in errors_at(response, "tools") and "launch" in errors_at(response, "tools")
    assert 'value="launch"' in response.content.decode()
    script = page_client(creator).post("/tasks/new/", form(model_script="[{"))
    assert "not JSON" in errors_at(script, "model_script")
    assert not Task.objects.exists()


@pytest.mark.parametrize(
    ("files", "extra", "said"),
    [
        ([SimpleUploadedFile("big.txt", b"x" * (UPLOAD_FILE_MAX_BYTES + 1))], {}, "big.txt is"),
        (
            [SimpleUploadedFile("img.png", b"\x89PNG\r\n\x1a\n\xff\xfe\x00")],
            {},
            "img.png is binary",
        ),
        ([SimpleUploadedFile("nul.txt", b"a\x00b")], {}, "nul.txt is binary"),
        (
            [SimpleUploadedFile(f"f{n}.txt", b"x") for n in range(UPLOAD_MAX_FILES + 1)],
            {},
            f"{UPLOAD_MAX_FILES + 1} files uploaded at once",
        ),
        (
            [SimpleUploadedFile("ok.txt", b"fine")],
            {"upload_folder": "../outside"},
            "leaves the workspace",
        ),
        ([], {"file_path": ["../../etc/passwd"], "file_content": ["x"]}, "leaves the workspace"),
        ([], {"file_path": ["/etc/passwd"], "file_content": ["x"]}, "is absolute"),
        ([], {"file_path": ["a.txt", "a.txt"], "file_content": ["1", "2"]}, "a.txt is given twice"),
    ],
    ids=[
        "huge",
        "binary",
        "nul",
        "too-many",
        "upload-folder-escapes",
        "dotdot",
        "absolute",
        "twice",
    ],
)
def test_hostile_files_are_refused_by_name_and_nothing_typed_is_lost(creator, files, extra, said):
    data = form(goal="My long goal", **extra)
    if files:
        data["upload"] = files
    response = page_client(creator).post("/tasks/new/", data)
    assert response.status_code == 422
    assert said in errors_at(response, "files")
    page = response.content.decode()
    assert "My long goal" in page and 'value="Summarise"' in page
    assert not Task.objects.exists()


def test_an_upload_named_like_a_path_lands_inside_the_workspace(creator):
    upload = SimpleUploadedFile("../../../etc/cron.d/x", b"hi\n")
    page_client(creator).post("/tasks/new/", form(upload=[upload]))
    files = Task.objects.get().spec["workspace"]["files"]
    assert files == {"in.txt": "one\n", "x": "hi\n"}


def test_an_accepted_upload_comes_back_as_a_row_when_the_form_is_refused(creator):
    upload = SimpleUploadedFile("notes.md", b"# kept\n")
    response = page_client(creator).post("/tasks/new/", form(upload=[upload], budget_max_steps="0"))
    page = response.content.decode()
    assert 'value="notes.md"' in page and "# kept" in page


def test_the_form_saves_a_template_and_shows_it_again(creator):
    client = page_client(creator)
    response = client.post(
        "/tasks/new/",
        form(
            action="save_template",
            template_name="daily summary",
            other='{"checks": {"files_exist": ["in.txt"]}}',
        ),
    )
    template = TaskTemplate.objects.get()
    assert response.status_code == 302 and str(template.id) in response["Location"]
    assert template.created_by == creator and template.name == "daily summary"
    assert template.spec["checks"] == {"files_exist": ["in.txt"]}
    assert not Task.objects.exists()
    page = client.get(response["Location"]).content.decode()
    assert 'value="Summarise"' in page and "one\n</textarea>" in page
    assert "files_exist" in page  # the section the form has no input for, kept as JSON
    unnamed = client.post("/tasks/new/", form(action="save_template"))
    assert "template_name" in errors_at(unnamed, "template_name")


def test_a_task_page_saves_its_spec_as_a_template(creator, task_api):
    spec = {**scripted_spec(SCRIPT, ["read_file"]), "workspace": {"files": {"in.txt": "1"}}}
    task = task_api.create(spec)
    page = page_client(creator).get(f"/tasks/{task['id']}/").content.decode()
    assert 'data-testid="save-template"' in page
    response = page_client(creator).post(f"/tasks/{task['id']}/save-template/", {"name": "again"})
    template = TaskTemplate.objects.get()
    assert str(template.source_task_id) == task["id"] and template.created_by == creator
    assert response["Location"] == f"/tasks/new/?template={template.id}"


def test_a_registered_graph_runs_with_its_input_and_an_unregistered_agent_is_named(creator):
    client = page_client(creator)
    graph = form(agent="langgraph:release_bot", agent_input='{"version": "1.2"}', tools=[])
    assert client.post("/tasks/new/", graph).status_code == 302
    agent = Task.objects.get().spec["agent"]
    assert agent == {"kind": "langgraph", "graph": "release_bot", "input": {"version": "1.2"}}
    sdk = client.post("/tasks/new/", form(agent="pydantic-ai:nobody", agent_input="hi"))
    assert sdk.status_code == 422
    assert "agent.name" in errors_at(sdk, "agent") and "nobody" in errors_at(sdk, "agent")


def test_a_spec_the_form_cannot_show_field_by_field_comes_back_whole():
    """A template's sections without inputs (checks, a replayed model, a key variable) go to
    "Other spec sections" and return unchanged with what the form shows."""
    from dashboard.new_task import form_from_spec, spec_from_form

    specs = [
        {
            **scripted_spec(SCRIPT, ["read_file"]),
            "checks": {"files_exist": ["in.txt"]},
            "workspace": {"files": {"a/b.txt": "x\n"}},
            "budget": {"max_steps": 7},
        },
        {
            "title": "t",
            "goal": "g",
            "priority": "low",
            "tools": [],
            "model": {"kind": "replay", "task_id": "abc"},
        },
        {
            "title": "t",
            "goal": "g",
            "priority": "default",
            "tools": [],
            "agent": {
                "kind": "openai-agents",
                "name": "helper",
                "input": "hi",
                "model": {"kind": "openai", "model": "m"},
            },
        },
    ]
    for spec in specs:
        form_state = form_from_spec(spec)
        again = spec_from_form(form_state)
        assert not form_state.errors
        if "budget" in again:
            again["budget"] = {k: int(v) for k, v in again["budget"].items()}
        assert again == {"priority": "default", **spec}


def test_a_form_over_djangos_bounds_is_refused_saying_so(creator):
    client = page_client(creator)
    many = [SimpleUploadedFile(f"f{n}.txt", b"x") for n in range(101)]
    too_many = client.post("/tasks/new/", form(upload=many))
    assert too_many.status_code == 413
    assert "more than 100 files" in too_many.content.decode()
    huge = client.post("/tasks/new/", form(file_content=["x" * 3_000_000, ""]))
    assert huge.status_code == 413
    assert "bytes of fields: nothing was saved" in huge.content.decode()
    assert not Task.objects.exists()
