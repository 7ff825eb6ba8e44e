"""Attacks on `/metrics`: scraping without the token, with a wrong one, with the token where it
would leak (the query string), with only a session, from outside HARNESS_METRICS_ALLOW; and
label injection through names a model or a person chooses."""

from __future__ import annotations

import ipaddress
from types import SimpleNamespace

import pytest
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from agent.runtime.attempt import tool_label
from harness_base.metrics import (
    REVIEW_WAIT_SECONDS,
    TOOL_CALL_SECONDS,
    TOOL_FAILURES,
    label_bounded,
    metric_inc,
    metric_observe,
    metrics_connection,
    metrics_flush,
)
from review.models import ReviewRequest
from tests.factories import PASSWORD, run_in_process, scripted_task

pytestmark = pytest.mark.django_db

TOKEN = "s3cret-metrics-token"


@pytest.fixture
def token(settings) -> str:
    settings.HARNESS_METRICS_TOKEN = TOKEN
    settings.HARNESS_METRICS_ALLOW = []
    return TOKEN


def get(**kwargs) -> object:
    return Client(**kwargs.pop("client", {})).get("/metrics", **kwargs)


def test_metrics_are_off_without_a_token_or_an_allowlist(settings, admin_user):
    settings.HARNESS_METRICS_TOKEN = ""
    settings.HARNESS_METRICS_ALLOW = []
    response = get()
    assert response.status_code == 403
    assert b"HARNESS_METRICS_TOKEN" in response.content
    # Not even a superuser's session opens them.
    client = Client()
    assert client.login(username=admin_user.username, password=PASSWORD)
    assert client.get("/metrics").status_code == 403


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer wrong-token"},
        {"Authorization": f"Bearer {TOKEN}x"},
        {"Authorization": f"Basic {TOKEN}"},
        {"Authorization": TOKEN},
        {"Authorization": "Bearer "},
    ],
    ids=["none", "wrong", "longer", "basic", "bare", "empty"],
)
def test_a_scrape_without_the_right_bearer_token_is_refused(token, headers):
    response = get(headers=headers)
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert b"harness_" not in response.content


@pytest.mark.parametrize("param", ["token", "access_token", "bearer", "authorization"])
def test_the_token_in_the_query_string_is_not_accepted(token, param):
    response = Client().get("/metrics", {param: TOKEN})
    assert response.status_code == 401


def test_a_session_is_not_a_token(token, admin_user):
    client = Client()
    assert client.login(username=admin_user.username, password=PASSWORD)
    assert client.get("/metrics").status_code == 401


def test_the_right_token_scrapes(token):
    response = get(headers={"Authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 200
    assert b"harness_tasks{" in response.content


def test_the_allowlist_refuses_other_addresses_even_with_the_token(token, settings):
    settings.HARNESS_METRICS_ALLOW = [ipaddress.ip_network("10.0.0.0/8")]
    auth = {"Authorization": f"Bearer {TOKEN}"}
    assert get(headers=auth).status_code == 403  # the test client is 127.0.0.1
    assert get(headers=auth, client={"REMOTE_ADDR": "10.1.2.3"}).status_code == 200
    # With both set, the address alone is not enough.
    assert get(client={"REMOTE_ADDR": "10.1.2.3"}).status_code == 401


def test_an_allowlist_alone_opens_metrics_to_those_networks(settings):
    settings.HARNESS_METRICS_TOKEN = ""
    settings.HARNESS_METRICS_ALLOW = [ipaddress.ip_network("192.0.2.0/24")]
    assert get(client={"REMOTE_ADDR": "192.0.2.7"}).status_code == 200
    assert get(client={"REMOTE_ADDR": "198.51.100.1"}).status_code == 403


def _exposition(token: str) -> str:
    metrics_flush()
    response = get(headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 200
    return response.content.decode()


HOSTILE = 'x"} 1\nharness_injected_total 99\n# {a="'


def test_hostile_label_values_become_other(token):
    redis = metrics_connection()
    redis.delete(TOOL_FAILURES.key, REVIEW_WAIT_SECONDS.key)
    metric_inc(TOOL_FAILURES, tool=HOSTILE, error_class="permanent")
    metric_inc(TOOL_FAILURES, tool="a" * 500, error_class="permanent")
    metric_observe(REVIEW_WAIT_SECONDS, 5.0, rule=HOSTILE, outcome="approved")
    text = _exposition(token)
    assert "harness_injected_total" not in text
    families = {f.name: f for f in text_string_to_metric_families(text)}
    tools = {s.labels["tool"] for s in families["harness_tool_failures"].samples}
    assert tools == {"other"}
    rules = {s.labels["rule"] for s in families["harness_review_wait_seconds"].samples}
    assert rules == {"other"}
    assert label_bounded("write_file") == "write_file"


def test_a_tool_the_model_was_not_given_never_becomes_a_series(token):
    redis = metrics_connection()
    redis.delete(TOOL_CALL_SECONDS.key, TOOL_FAILURES.key)
    task = scripted_task(
        [
            {"call": "write_file", "args": {"path": "a", "content": "pwned"}},
            {"call": "read_file", "args": {"path": "a"}},
            {"final": "ok"},
        ],
        ["read_file"],
        workspace={"files": {"a": "x"}},
    )
    assert run_in_process(task) == "succeeded"
    text = _exposition(token)
    assert 'harness_tool_call_duration_seconds_count{tool="read_file"} 1.0' in text
    assert 'tool="write_file"' not in text


def test_an_mcp_server_naming_its_own_tools_cannot_mint_series():
    """An MCP server names its tools; a task that lets them in by `server__*` counts them
    under that wildcard, however many names the server invents."""
    spec = SimpleNamespace(tools=["files__*", "files__read"])
    run = SimpleNamespace(
        spec=spec, mcp_specs={"files__read": None, f"files__{HOSTILE}": None, "files__x1": None}
    )
    assert tool_label(run, "files__read") == "files__read"
    assert tool_label(run, f"files__{HOSTILE}") == "files__*"
    assert tool_label(run, "files__x1") == "files__*"
    assert tool_label(run, "read_file") == "read_file"


def test_a_standing_rule_a_person_named_counts_as_other(token, paused_review):
    review = paused_review()
    ReviewRequest.objects.filter(pk=review.pk).update(
        matched_rules=[{"name": HOSTILE, "action": "review", "source": "standing"}]
    )
    text = _exposition(token)
    assert "harness_injected_total" not in text
    assert 'harness_reviews_pending{rule="other"} 1.0' in text
