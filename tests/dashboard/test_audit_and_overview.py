"""/audit/ filters, and the overview's counts, window figures and links."""

from __future__ import annotations

from datetime import timedelta
from urllib.parse import parse_qs, urlsplit

import pytest
from django.utils import timezone

from review.models import ReviewRequest
from tasks.models import AuditEntry
from tasks.services import audit_record
from tests.factories import TaskFactory, ToolCallFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def entries(operator, admin_user):
    task = TaskFactory()
    audit_record(user=operator, action="cancel", task_id=task.id, reason="stop it")
    audit_record(user=admin_user, action="requeue", target="rq:default:abc")
    old = audit_record(user=operator, action="retry", task_id=task.id)
    AuditEntry.objects.filter(id=old.id).update(at=timezone.now() - timedelta(days=10))
    return task


@pytest.mark.parametrize(
    "params, actions",
    [
        ({}, ["requeue", "cancel", "retry"]),
        ({"actor": "operator"}, ["cancel", "retry"]),
        ({"action": "requeue"}, ["requeue"]),
        ({"date_to": str((timezone.now() - timedelta(days=5)).date())}, ["retry"]),
    ],
)
def test_audit_log_filters(as_user, viewer, entries, params, actions):
    response = as_user(viewer).get("/audit/", params)
    assert [e.action for e in response.context["page"].object_list] == actions


def test_audit_log_filters_by_task(as_user, viewer, entries):
    response = as_user(viewer).get("/audit/", {"task": str(entries.id)})
    assert {e.action for e in response.context["page"].object_list} == {"cancel", "retry"}
    assert "stop it" in response.content.decode()


def test_overview_counts_every_status_with_the_oldest_review(as_user, viewer):
    for status in ("running", "running", "retry_wait", "stalled", "waiting_review"):
        task = TaskFactory(status=status)
    ReviewRequest.objects.create(
        task=task,
        tool_call=ToolCallFactory(task=task, tool="write_file", status="awaiting_review"),
        tool="write_file",
        requested_at=timezone.now() - timedelta(hours=2),
    )
    response = as_user(viewer).get("/")
    counts = response.context["status"]["counts"]
    assert (
        counts["running"],
        counts["retry_wait"],
        counts["stalled"],
        counts["waiting_review"],
    ) == (2, 1, 1, 1)
    html = response.content.decode()
    assert 'data-testid="oldest-review">oldest <time' in html
    assert ">2\xa0hours</time>" in html
    assert 'href="/tasks/?status=stalled"' in html
    # Active tasks: the counts poll for updates.
    assert 'hx-trigger="every 5s" data-live-poll' in html


def test_overview_window_numbers_link_to_the_prefiltered_list(as_user, viewer):
    now = timezone.now()
    TaskFactory(status="failed", error_class="timeout", finished_at=now - timedelta(hours=1))
    TaskFactory(status="succeeded", finished_at=now - timedelta(hours=2))
    TaskFactory(status="failed", error_class="timeout", finished_at=now - timedelta(days=3))
    client = as_user(viewer)
    response = client.get("/", {"since": "24h"})
    outcomes = response.context["outcomes"]
    assert (outcomes["failed"], outcomes["succeeded"], outcomes["failure_rate_pct"]) == (1, 1, 50.0)
    link = response.context["links"]["failed"]
    assert parse_qs(urlsplit(link).query)["status"] == ["failed"]
    listed = client.get(link).context["page"].object_list
    assert [t.error_class for t in listed] == ["timeout"]
    [mix] = response.context["error_mix"]
    assert client.get(mix["url"]).context["page"].paginator.count == 1


def test_overview_without_active_tasks_does_not_poll(as_user, viewer):
    TaskFactory(status="succeeded")
    assert "hx-trigger" not in as_user(viewer).get("/").content.decode()


def test_overview_query_count_is_bounded(as_user, viewer, django_assert_max_num_queries):
    client = as_user(viewer)
    client.get("/")
    for n in range(40):
        TaskFactory(status="failed", error_class=f"e{n % 4}", finished_at=timezone.now())
    # 14: the nav's live review summary counts what this user may decide, which loads the
    # user's permissions (two queries, cached for the request) on top of the group names; the
    # layout reads the user's time zone.
    with django_assert_max_num_queries(14):
        assert client.get("/").status_code == 200
