"""Keys are bound to endpoints: a spec chooses among the configured endpoints, each takes the
key the operator bound to it, and no spec can pair a key with another endpoint."""

from __future__ import annotations

import pytest

from tasks.services import SpecError
from tests.llm.chat_server import ChatServer
from tests.llm.support import create, run

pytestmark = pytest.mark.django_db(transaction=True)

DEFAULT_KEY = "sk-default-for-openai-base-url"
GPU_KEY = "sk-gpu-box-only"


@pytest.fixture
def servers(settings, monkeypatch, tmp_path):
    """Three loopback model servers: the default endpoint (OPENAI_BASE_URL + OPENAI_API_KEY),
    a GPU box bound to GPU_BOX_API_KEY, and a keyless local one."""
    settings.HARNESS_WORKSPACE_ROOT = tmp_path / "ws"
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


def authorization(server: ChatServer) -> list[str | None]:
    return [r.headers.get("Authorization") for r in server.requests]


def test_each_endpoint_gets_only_its_own_key(servers):
    for name in servers:
        servers[name].answer("done")
    assert run(create({"kind": "openai"}, [])).status == "succeeded"
    gpu = run(create({"kind": "openai", "base_url": servers["gpu"].base_url}, []))
    local = run(create({"kind": "openai", "base_url": servers["local"].base_url}, []))
    assert gpu.status == local.status == "succeeded"
    assert authorization(servers["default"]) == [f"Bearer {DEFAULT_KEY}"]
    assert authorization(servers["gpu"]) == [f"Bearer {GPU_KEY}"]
    assert authorization(servers["local"]) == [None]


@pytest.mark.parametrize(
    "model",
    [
        # The default endpoint with another endpoint's key.
        {"kind": "openai", "api_key_env": "GPU_BOX_API_KEY"},
        # An allowed extra endpoint with the default key.
        {"kind": "openai", "base_url": "GPU", "api_key_env": "OPENAI_API_KEY"},
        # A keyless endpoint with any key.
        {"kind": "openai", "base_url": "LOCAL", "api_key_env": "GPU_BOX_API_KEY"},
    ],
)
def test_a_spec_cannot_pair_a_key_with_another_endpoint(servers, model):
    urls = {"GPU": servers["gpu"].base_url, "LOCAL": servers["local"].base_url}
    model = {k: urls.get(v, v) for k, v in model.items()}
    with pytest.raises(SpecError) as exc:
        create(model, [])
    assert exc.value.field.startswith("model")
    assert "api_key_env" in exc.value.message
    assert all(not server.requests for server in servers.values())


def test_the_wildcard_admits_any_endpoint_but_never_with_a_key(servers, settings):
    settings.HARNESS_MODEL_ENDPOINTS = ["*"]
    servers["gpu"].answer("done")
    task = run(create({"kind": "openai", "base_url": servers["gpu"].base_url}, []))
    assert task.status == "succeeded"
    assert authorization(servers["gpu"]) == [None]
