"""An SDK agent's model output on the task page while the model is still answering, in headless
Chromium with a real rqworker: the fake model streams its first chunks, then waits until the
test releases it; the page shows those chunks under `model` / `turn 1` before the turn has
ended (no model_decision yet), and once released the task succeeds with the whole answer.
Both adapters: Pydantic AI (a FunctionModel's stream_function) and the OpenAI Agents SDK (a
Model's stream_response)."""

from __future__ import annotations

import json
import uuid

import pytest

from tasks.models import TaskEvent
from tests.conftest import BROWSER
from tests.factories import spec_task

from .conftest import TEST_CONFIG, task_status, wait_status
from .sdk_agents import FINAL, STREAMED, oa_release_path, release

pytestmark = [*BROWSER, pytest.mark.integration]

TEXT = "[data-testid=live-stream][data-name=text] pre"


@pytest.fixture
def harness_config_text() -> str:
    return TEST_CONFIG + (
        'pydantic_ai_agents:\n  streamer: "tests.durable.sdk_agents:pai_streamer"\n'
        'openai_agents:\n  streamer: "tests.durable.sdk_agents:oa_streamer"\n'
    )


def _streaming_task(kind: str, tmp_path, operator):
    """The task and the path that releases its model."""
    if kind == "pydantic-ai":
        agent = {"input": json.dumps({"marker_dir": str(tmp_path)})}
        goal, gate = "draft the notes", tmp_path / "release"
    else:
        key = uuid.uuid4().hex
        agent, goal, gate = {}, f"task {key}: draft the notes", oa_release_path(key)
    spec = {
        "title": "streamer",
        "goal": goal,
        "agent": {"kind": kind, "name": "streamer", **agent},
    }
    return spec_task(spec, user=operator, enqueue=True), gate


@pytest.mark.parametrize("kind", ["pydantic-ai", "openai-agents"])
def test_the_task_page_shows_the_model_s_text_before_its_turn_ends(
    fleet, open_page, operator, tmp_path, kind
):
    fleet.worker(1)
    task, gate = _streaming_task(kind, tmp_path, operator)
    page = open_page(operator, f"/tasks/{task.id}/", timeout_ms=60_000)

    # What the model has streamed so far shows while its turn still runs.
    page.wait_for_function(
        "([sel, text]) => (document.querySelector(sel)?.textContent || '').includes(text)",
        arg=[TEXT, "".join(STREAMED)],
        timeout=60_000,
    )
    assert not gate.exists()  # the model waits for this: its turn has not ended
    assert task_status(task.id) == "running"
    assert not TaskEvent.objects.filter(task=task, type="model_decision").exists()
    heading = page.inner_text("[data-testid=live-output] h2")
    assert heading.startswith("Running now: model") and "turn 1" in heading
    assert FINAL not in page.inner_text(TEXT)

    release(gate)
    task = wait_status(task.id, "succeeded")
    assert task.result.endswith(FINAL)
    assert TaskEvent.objects.filter(task=task, type="model_decision").count() == 1
