"""A task that finished after a person rejected or edited one of its calls says so: in its
header, its task-list row, the API and the statistics ("succeeded · 1 call rejected"). The
counts are kept on the task row by the decision, so the list reads no other table."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from dashboard import stats
from dashboard.windows import window_parse
from review.services import review_decide
from tasks.models import Task
from tasks.rollups import rollups_advance
from tests.conftest import approve
from tests.factories import TaskFactory, run_in_process

pytestmark = pytest.mark.django_db(transaction=True)


def finished(review) -> Task:
    task = Task.objects.get(pk=review.task_id)
    assert run_in_process(task) == "succeeded"
    return Task.objects.get(pk=task.pk)


def test_a_rejected_call_marks_the_finished_task_everywhere(
    paused_review, operator, as_user, api_client
):
    review = paused_review()
    review_decide(review_id=review.id, user=operator, decision="reject", reason="keep it")
    task = finished(review)
    assert (task.calls_rejected, task.calls_edited) == (1, 0)
    assert task.review_notes == ["1 call rejected"]

    page = as_user(operator).get(f"/tasks/{task.id}/").content.decode()
    assert 'data-testid="task-review-notes"> · 1 call rejected</span>' in page
    listed = as_user(operator).get("/tasks/").content.decode()
    assert 'data-testid="row-review-notes"> · 1 call rejected</span>' in listed
    shown = api_client(operator).get(f"/api/v1/tasks/{task.id}").json()
    assert (shown["status"], shown["calls_rejected"], shown["calls_edited"]) == (
        "succeeded",
        1,
        0,
    )


def test_an_edited_approval_marks_the_finished_task(paused_review, operator):
    review = paused_review(
        [{"call": "delete_file", "args": {"path": "old.log"}}, {"final": "done"}],
        files={"old.log": "stale\n", "older.log": "x\n"},
    )
    approve(review, operator, arguments={"path": "older.log"})
    task = finished(review)
    assert (task.calls_rejected, task.calls_edited) == (0, 1)
    assert task.review_notes == ["1 call edited"]


def test_an_approval_as_proposed_marks_nothing(paused_review, operator):
    review = paused_review()
    approve(review, operator)
    task = finished(review)
    assert task.review_notes == []


def test_statistics_count_successes_with_rejected_and_edited_calls_raw_and_rolled(
    paused_review, operator
):
    review = paused_review()
    review_decide(review_id=review.id, user=operator, decision="reject", reason="no")
    finished(review)
    TaskFactory(status="succeeded", finished_at=timezone.now(), calls_edited=2)
    now = timezone.now()
    window = window_parse(since="7d", bucket=None, now=now)
    raw = stats.task_outcomes(window)
    assert (raw["succeeded_with_rejected_calls"], raw["succeeded_with_edited_calls"]) == (1, 1)
    Task.objects.update(finished_at=now - timedelta(hours=3))
    while rollups_advance(now=now):
        pass
    parts = stats.window_parts(window)
    assert parts.rolled is not None
    assert stats.task_outcomes(window, parts=parts) == stats.task_outcomes(window)
    rolled = stats.task_outcomes(window)
    assert (rolled["succeeded_with_rejected_calls"], rolled["succeeded_with_edited_calls"]) == (
        1,
        1,
    )


def test_the_statistics_page_and_overview_say_how_many_successes_had_a_rejected_call(
    as_user, viewer
):
    TaskFactory(status="succeeded", finished_at=timezone.now(), calls_rejected=1)
    page = as_user(viewer).get("/stats/failures/?since=24h").content.decode()
    assert "1 with a call a reviewer rejected" in page
    overview = as_user(viewer).get("/").content.decode()
    assert "1 with a call rejected" in overview


def test_the_task_list_reads_the_counts_without_a_query_per_row(as_user, viewer):
    for _ in range(3):
        TaskFactory(status="succeeded", calls_rejected=1)
    client = as_user(viewer)
    client.get("/tasks/")
    with CaptureQueriesContext(connection) as few:
        client.get("/tasks/")
    for _ in range(20):
        TaskFactory(status="succeeded", calls_rejected=2, calls_edited=1)
    with CaptureQueriesContext(connection) as many:
        page = client.get("/tasks/").content.decode()
    assert page.count(" · 2 calls rejected · 1 call edited") == 20
    assert len(many) == len(few)
