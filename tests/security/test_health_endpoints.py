"""The probes answer anyone (a load balancer has no session) and so reveal nothing beyond their
answer: no version, host, port, credential or error text, even when a part is failing."""

from __future__ import annotations

import pytest
from django.test import Client

from tests.conftest import free_port

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("path", ["/healthz", "/readyz"])
def test_probes_answer_without_login_and_set_no_session(path):
    response = Client().get(path)
    assert response.status_code == 200
    assert not response.cookies, "a probe must not start a session"
    assert "no-cache" in response["Cache-Control"]


@pytest.mark.parametrize("path", ["/healthz", "/readyz"])
def test_probes_refuse_writes(path):
    assert Client().post(path).status_code == 405


def test_a_failing_readyz_names_the_part_and_nothing_else(settings):
    port = free_port()
    settings.REDIS_URL = f"redis://probe-user:hunter2-secret@127.0.0.1:{port}/3"
    response = Client().get("/readyz")
    assert response.status_code == 503
    assert response.json() == {"ready": False, "failing": ["redis"]}
    body = response.content.decode()
    for secret in ("hunter2", "probe-user", "127.0.0.1", str(port), "Error", "refused"):
        assert secret not in body
