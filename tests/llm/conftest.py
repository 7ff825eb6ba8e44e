from __future__ import annotations

import pytest

from tests.llm.chat_server import ChatServer

API_KEY = "sk-test-loopback-key"


@pytest.fixture(autouse=True)
def _harness_settings(harness_dirs) -> None:
    pass


@pytest.fixture
def chat_server(settings, monkeypatch):
    """The loopback model server, configured as the default endpoint the way an operator
    would: OPENAI_BASE_URL, HARNESS_MODEL and OPENAI_API_KEY in the environment (inherited by
    worker processes started after this fixture) and in this process's settings."""
    server = ChatServer().start()
    for name, value in (("OPENAI_BASE_URL", server.base_url), ("HARNESS_MODEL", "gpt-4o-mini")):
        monkeypatch.setenv(name, value)
        setattr(settings, name, value)
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    yield server
    server.stop()
