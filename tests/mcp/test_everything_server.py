"""The npm reference server `@modelcontextprotocol/server-everything` (installed at its pinned
version into .data/npm by `./harness test`), run under node in the task's sandbox: images,
resource links and embedded resources reach the model as images or described references (the
URI kept) and are recorded; a tool that requires MCP task augmentation is not offered, with the
reason on /ops/; progress notifications are requested and shown live; a running call has its
row and `tool_started` while it runs."""

from __future__ import annotations

import base64

import pytest

from agent.llm.openai import wire_messages
from checkpoints.services import checkpoint_load_latest_valid
from harness_site.cli.bootstrap import NPM_PREFIX, NPM_TEST_PACKAGES
from tasks.models import ToolCall, ToolOutput
from tests.conftest import wait_for
from tests.factories import enqueued_task, queued_task, run_in_process

from .conftest import wait_status

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

PACKAGE = "@modelcontextprotocol/server-everything"
ENTRY = NPM_PREFIX / "node_modules" / PACKAGE / "dist" / "index.js"

# No review rules: these tests are about what the calls return.
CONFIG = f"""
retry: {{initial_s: 0.2, factor: 2, max_s: 5, jitter: full, max_attempts: 4}}
timeouts: {{session_s: 600, turn_s: 60, tool_s: 30}}
mcp_servers:
  everything:
    command: ["node", "{ENTRY}", "stdio"]
    ro_paths: ["{NPM_PREFIX}"]
    connect_timeout_s: 60
"""


@pytest.fixture
def harness_config_text() -> str:
    assert PACKAGE in NPM_TEST_PACKAGES and ENTRY.exists(), "run the tests with ./harness test"
    return CONFIG


def _state(task):
    return checkpoint_load_latest_valid(task_id=task.id, head_id=task.head_checkpoint_id).state


def test_image_links_and_embedded_resources_reach_the_model_and_the_record(durable_settings):
    task = queued_task(
        [
            {"call": "everything__get-tiny-image", "args": {}},
            {"call": "everything__get-resource-links", "args": {"count": 2}},
            {
                "call": "everything__get-resource-reference",
                "args": {"resourceType": "Text", "resourceId": 3},
            },
            {"final": "seen"},
        ],
        ["everything__*"],
    )
    assert run_in_process(task) and task.status == "succeeded", task.error_message
    calls = {c.tool.split("__")[1]: c for c in ToolCall.objects.filter(task=task)}

    image = calls["get-tiny-image"]
    (ref,) = image.result["content"]
    assert ref["type"] == "image" and ref["mime_type"] == "image/png" and ref["size"] > 100
    assert '[image 2 (mime_type: "image/png", size: ' in image.result["text"]
    stored = ToolOutput.objects.get(task=task, call_id=image.call_id, kind="image")
    assert stored.media_type == "image/png"

    links = calls["get-resource-links"]
    uris = [r["uri"] for r in links.result["content"]]
    assert len(uris) == 2 and all(u.startswith("demo://resource/") for u in uris)
    for uri in uris:  # never lost: in the model's text and the record
        assert f'uri: "{uri}"' in links.result["text"]
    assert all(r["type"] == "resource_link" and r.get("mime_type") for r in links.result["content"])

    embedded = calls["get-resource-reference"]
    assert embedded.status == "succeeded", (embedded.result, embedded.error_message)
    (resource,) = embedded.result["content"]
    assert resource["type"] == "resource" and resource["encoding"] == "text"
    assert f'[embedded resource 2 (uri: "{resource["uri"]}"' in embedded.result["text"]
    assert "Resource 3" in embedded.result["text"]  # its text, for the model

    finished = task.events.filter(type="tool_finished", payload__call_id=links.call_id).get()
    assert [r["uri"] for r in finished.payload["content"]] == uris

    # The model: the image as an image for a model that takes images, described otherwise.
    state = _state(task)
    (media,) = next(m for m in state.messages if m.call_id == image.call_id).media
    assert media.mime_type == "image/png" and base64.b64decode(media.data).startswith(b"\x89PNG")
    with_images = wire_messages(state, images=True)
    at = next(i for i, m in enumerate(with_images) if m.get("tool_call_id") == image.call_id)
    shown = with_images[at + 1]
    assert shown["role"] == "user"
    assert shown["content"][1]["image_url"]["url"] == f"data:image/png;base64,{media.data}"
    assert not any(isinstance(m["content"], list) for m in wire_messages(state, images=False))


def test_task_only_tool_is_not_offered_and_ops_says_why(durable_settings, operator, client):
    task = queued_task([{"final": "listed"}], ["everything__*"])
    assert run_in_process(task) and task.status == "succeeded", task.error_message
    listed = task.events.get(type="mcp_tools_listed").payload
    offered = {t["tool"] for t in listed["tools"]}
    assert "get-sum" in offered and "simulate-research-query" not in offered
    (why,) = [s for s in listed["skipped"] if s.startswith("simulate-research-query")]
    assert "execution.taskSupport: required" in why
    assert "simulate-research-query" not in {t.tool for t in _state(task).mcp_tools}

    client.force_login(operator)
    page = client.get("/ops/").content.decode()
    skipped = page.split('data-testid="mcp-skipped-everything"')[1].split("</details>")[0]
    assert "simulate-research-query: requires MCP task augmentation" in skipped


def test_progress_shows_live_and_the_running_call_is_recorded(fleet, operator, client):
    fleet.worker()
    task = enqueued_task(
        [
            {
                "call": "everything__trigger-long-running-operation",
                "args": {"duration": 8, "steps": 4},
            },
            {"final": "done"},
        ],
        ["everything__*"],
    )
    client.force_login(operator)

    def progress_shown() -> str | None:
        html = client.get(f"/tasks/{task.id}/live-output/").content.decode()
        return html if 'data-testid="live-progress"' in html else None

    html = wait_for(progress_shown, 60, message="the call's progress on the task page")
    assert "Running now: <code>everything__trigger-long-running-operation</code>" in html
    assert "/4 (" in html.split('data-testid="live-progress"')[1]
    # While it runs: its row and its tool_started event are written.
    running = ToolCall.objects.get(task=task)
    assert running.status == "running"
    assert task.events.filter(type="tool_started", payload__call_id=running.call_id).exists()

    task = wait_status(task.id, "succeeded", timeout=90)
    call = ToolCall.objects.get(task=task)
    progress = ToolOutput.objects.get(task=task, call_id=call.call_id, name="progress")
    assert progress.preview.splitlines()[-1] == "4/4 (100%)"
