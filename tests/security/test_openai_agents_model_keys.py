"""An OpenAI Agents SDK agent's model is bound as for the harness's own loop: an agent without a
model object of its own gets the operator's default endpoint (never the SDK's default one), a
spec picks among the endpoints the operator configured, each gets only the key bound to it (from
the worker's environment), and no spec can pair a key with another endpoint (a 4xx naming
agent.model)."""

from __future__ import annotations

import pytest

from agent.jobs import run_task
from tasks.services import SpecError, task_transition
from tests.factories import spec_task
from tests.llm.chat_server import ChatServer

pytestmark = pytest.mark.django_db(transaction=True)

DEFAULT_KEY = "sk-default-for-openai-base-url"
GPU_KEY = "sk-gpu-box-only"
CONFIG = """
timeouts: {session_s: 600, turn_s: 60, tool_s: 30}
openai_agents:
  modelless: "tests.durable.openai_agents:modelless"
"""


@pytest.fixture
def servers(settings, monkeypatch, harness_yaml, harness_dirs, quiet_watchdog):
    """Three loopback model servers: the default endpoint (OPENAI_BASE_URL + OPENAI_API_KEY),
    a GPU box bound to GPU_BOX_API_KEY, and a keyless local one."""
    harness_yaml(CONFIG)
    started = {name: ChatServer().start() for name in ("default", "gpu", "local")}
    settings.OPENAI_BASE_URL = started["default"].base_url
    settings.HARNESS_MODEL = "gpt-4o-mini"
    settings.HARNESS_MODEL_ENDPOINTS = [
        f"{started['gpu'].base_url}=GPU_BOX_API_KEY",
        started["local"].base_url,
    ]
    monkeypatch.setenv("OPENAI_API_KEY", DEFAULT_KEY)
    monkeypatch.setenv("GPU_BOX_API_KEY", GPU_KEY)
    yield started
    for server in started.values():
        server.stop()


def create(model: dict | None):
    agent = {"kind": "openai-agents", "name": "modelless", "input": "say hi"}
    if model is not None:
        agent["model"] = model
    return spec_task({"title": "keys", "goal": "say hi", "agent": agent})


def run(task):
    task_transition(task_id=task.id, to="queued")
    outcome = run_task(str(task.id))
    task.refresh_from_db()
    return outcome


def authorization(server: ChatServer) -> list[str | None]:
    return [
        {k.lower(): v for k, v in r.headers.items()}.get("authorization") for r in server.requests
    ]


def test_each_endpoint_gets_only_its_own_key(servers):
    servers["default"].answer("hi from default")
    servers["gpu"].tool_calls(("echo", {"text": "hi"}))
    servers["gpu"].answer("hi from gpu")
    servers["local"].answer("hi from local")

    default = create(None)
    gpu = create({"kind": "openai", "base_url": servers["gpu"].base_url})
    local = create({"kind": "openai", "base_url": servers["local"].base_url, "model": "llama"})
    assert [run(t) for t in (default, gpu, local)] == ["succeeded"] * 3, [
        (t.error_class, t.error_message) for t in (default, gpu, local)
    ]
    assert (default.result, gpu.result, local.result) == (
        "hi from default",
        "hi from gpu",
        "hi from local",
    )
    assert authorization(servers["default"]) == [f"Bearer {DEFAULT_KEY}"]
    assert authorization(servers["gpu"]) == [f"Bearer {GPU_KEY}"] * 2
    # A keyless endpoint gets a placeholder, never a real key.
    assert authorization(servers["local"]) == ["Bearer no-key"]
    assert servers["local"].chat_requests()[0]["model"] == "llama"
    assert servers["default"].chat_requests()[0]["model"] == "gpt-4o-mini"
    # The tool ran through the harness, with its ledger row.
    call = gpu.tool_calls.get()
    assert (call.tool, call.status, call.arguments) == ("echo", "succeeded", {"text": "hi"})


@pytest.mark.parametrize(
    "model",
    [
        {"kind": "openai", "api_key_env": "GPU_BOX_API_KEY"},
        {"kind": "openai", "base_url": "GPU", "api_key_env": "OPENAI_API_KEY"},
        {"kind": "openai", "base_url": "LOCAL", "api_key_env": "GPU_BOX_API_KEY"},
        {"kind": "openai", "base_url": "http://127.0.0.1:9/v1"},
    ],
)
def test_a_spec_cannot_pair_a_key_with_another_endpoint_or_pick_its_own(servers, model):
    urls = {"GPU": servers["gpu"].base_url, "LOCAL": servers["local"].base_url}
    model = {k: urls.get(v, v) for k, v in model.items()}
    with pytest.raises(SpecError) as exc:
        create(model)
    assert exc.value.field == "agent.model"
    assert all(not server.requests for server in servers.values())


def test_an_endpoint_that_does_not_stream_is_asked_again_without_streaming(servers):
    """The adapter streams its model turns (to the task page's live view); an endpoint that
    answers a streamed request with plain JSON is asked once more without `stream`, and from
    then on never streamed to: the agent gets its real answers."""
    default = servers["default"]
    default.streams = False
    default.answer("lost: a JSON body where events were expected")
    default.tool_calls(("echo", {"text": "hi"}))
    default.answer("hi without streaming")
    task = create(None)
    assert run(task) == "succeeded", (task.error_class, task.error_message)
    assert task.result == "hi without streaming"
    assert [bool(r.get("stream")) for r in default.chat_requests()] == [True, False, False]
