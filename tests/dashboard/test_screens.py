"""Pages on any screen and in any zone (issue 25): times as <time> elements with the UTC
moment, the per-user time zone, the no-role page in the layout, the navigation's search, and
sortable columns in the task list and the review inbox."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from html import escape

import pytest
from django.utils import timezone

from dashboard.models import UserPreference
from harness_site.filters import as_time
from tests.factories import ReviewRequestFactory, TaskFactory

pytestmark = pytest.mark.django_db


def test_a_moment_is_served_in_utc_with_the_iso_moment_on_hover():
    moment = datetime(2026, 12, 2, 8, 14, 3, 120_000, tzinfo=UTC)
    assert as_time(moment) == (
        '<time datetime="2026-12-02T08:14:03.120Z" data-style="datetime" '
        'title="2026-12-02T08:14:03.120Z">2026-12-02 08:14 UTC</time>'
    )
    assert ">08:14:03.120 UTC<" in as_time(moment, "ms")
    assert ">2026-12-02 08:14:03 UTC<" in as_time(moment, "seconds")
    assert as_time(None) == "—"
    # Relative times keep their words; the moment is on hover.
    ago = as_time(timezone.now() - timedelta(minutes=5), "ago")
    assert ">5\xa0minutes ago</time>" in ago and 'data-style="ago"' in ago


def test_the_time_zone_setting_is_validated_saved_and_put_on_the_page(as_user, viewer):
    client = as_user(viewer)
    page = client.get("/preferences/")
    assert page.status_code == 200
    assert b'data-time-zone=""' in page.content

    bad = client.post("/preferences/", {"time_zone": "Mars/Olympus_Mons"})
    assert bad.status_code == 422
    assert "time_zone: Select a valid choice" in bad.content.decode()
    assert not UserPreference.objects.exists()

    saved = client.post("/preferences/", {"time_zone": "Asia/Kolkata"})
    assert saved.status_code == 302
    assert b'data-time-zone="Asia/Kolkata"' in client.get("/tasks/").content

    client.post("/preferences/", {"time_zone": ""})
    assert b'data-time-zone=""' in client.get("/tasks/").content


def test_the_no_role_page_is_in_the_layout_with_log_out_and_no_data(as_user, outsider, operator):
    ReviewRequestFactory(task=TaskFactory(title="secret migration"))
    response = as_user(outsider).get("/")
    assert response.status_code == 403
    body = response.content.decode()
    assert 'action="/accounts/logout/"' in body and 'aria-label="Main"' in body
    assert "no role here" in body
    # Not the pending count, not the live review signals.
    assert "pending-count" not in body and "reviews-live" not in body
    assert "secret migration" not in body


# --- search -------------------------------------------------------------------------------------


@pytest.fixture
def found(operator):
    task = TaskFactory(title="Rotate the staging keys")
    other = TaskFactory(title="Rotate the production keys")
    review = ReviewRequestFactory(task=TaskFactory(title="unrelated"))
    return task, other, review


def test_search_opens_a_task_by_id_prefix_and_a_review_by_id(as_user, viewer, found):
    task, _, review = found
    client = as_user(viewer)
    for q in (str(task.id)[:8], str(task.id), str(task.id).upper()):
        response = client.get("/search/", {"q": q})
        assert response.status_code == 302, q
        assert response["Location"] == f"/tasks/{task.id}/"
    response = client.get("/search/", {"q": f"#{review.id}"})
    assert response["Location"] == f"/reviews/{review.id}/"


def test_search_lists_the_tasks_whose_title_matches(as_user, viewer, found):
    response = as_user(viewer).get("/search/", {"q": "rotate the"})
    assert response.status_code == 200
    titles = [t.title for t in response.context["found"].tasks]
    assert titles == ["Rotate the production keys", "Rotate the staging keys"]
    assert as_user(viewer).get("/search/", {"q": "staging"})["Location"].startswith("/tasks/")
    nothing = as_user(viewer).get("/search/", {"q": "no such words"})
    assert "Nothing matches" in nothing.content.decode()


def test_search_input_is_bounded_and_needs_a_role(as_user, viewer, outsider, found):
    client = as_user(viewer)
    too_long = client.get("/search/", {"q": "x" * 201})
    assert too_long.status_code == 422
    assert "q: Ensure this value has at most 200 characters" in too_long.content.decode()
    nul = client.get("/search/", {"q": "a\x00b"})
    assert nul.status_code == 422 and b"q: NUL" in nul.content
    task = found[0]
    denied = as_user(outsider).get("/search/", {"q": str(task.id)})
    assert denied.status_code == 403
    assert task.title not in denied.content.decode()


# --- sorting ------------------------------------------------------------------------------------


def test_the_task_list_sorts_by_a_column_and_keeps_its_filters(as_user, viewer, operator):
    now = timezone.now()
    TaskFactory(title="bravo", status="failed", created_at=now - timedelta(hours=2))
    TaskFactory(title="alpha", status="failed", created_at=now - timedelta(hours=1))
    TaskFactory(title="charlie", status="failed", created_at=now)
    TaskFactory(title="delta", status="succeeded", created_at=now)
    client = as_user(viewer)

    def titles(**params) -> list[str]:
        response = client.get("/tasks/", params)
        assert response.status_code == 200
        return [t.title for t in response.context["page"].object_list]

    assert titles(status="failed") == ["charlie", "alpha", "bravo"]
    assert titles(status="failed", sort="title") == ["alpha", "bravo", "charlie"]
    assert titles(status="failed", sort="-title") == ["charlie", "bravo", "alpha"]
    assert titles(status="failed", sort="created") == ["bravo", "alpha", "charlie"]
    assert titles(sort="status")[-1] == "delta"
    # An unknown sort is dropped like a bad filter: the default order.
    assert titles(status="failed", sort="-id; drop") == ["charlie", "alpha", "bravo"]

    page = client.get("/tasks/", {"status": "failed", "sort": "title"}).content.decode()
    assert 'aria-sort="ascending"><a href="?status=failed&amp;sort=-title"' in page
    assert 'aria-sort="none"><a href="?status=failed&amp;sort=status"' in page


def test_the_inbox_column_headers_sort_it(as_user, viewer, operator):
    old = ReviewRequestFactory(tool_call__tool="write_file")
    old.requested_at = timezone.now() - timedelta(hours=1)
    old.save(update_fields=["requested_at"])
    new = ReviewRequestFactory(tool_call__tool="delete_file")
    client = as_user(viewer)
    page = client.get("/reviews/").content.decode()
    assert 'aria-sort="descending"><a href="?sort=newest" data-testid="sort-waiting"' in page
    newest = client.get("/reviews/", {"sort": "newest"})
    assert [r.id for r in newest.context["page"].object_list] == [new.id, old.id]
    assert 'aria-sort="ascending"><a href="?sort=age"' in newest.content.decode()
    by_tool = client.get("/reviews/", {"sort": "tool", "risk": ""})
    assert [r.tool for r in by_tool.context["page"].object_list] == ["delete_file", "write_file"]


@pytest.mark.parametrize(
    ("cost", "shown"),
    [
        (Decimal("0"), "$0"),
        (Decimal("0.00004"), "< $0.0001"),
        (Decimal("0.0012"), "$0.0012"),
        (Decimal("0.000810"), "$0.00081"),
        (Decimal("0.123456"), "$0.12"),
        (Decimal("0.5"), "$0.50"),
        (Decimal("1234.5"), "$1,234.50"),
    ],
)
def test_a_task_cost_shows_at_a_precision_that_reads(as_user, viewer, cost, shown):
    task = TaskFactory(status="succeeded", cost_usd=cost)
    html = as_user(viewer).get(f"/tasks/{task.id}/").content.decode()
    assert f'data-testid="task-cost">{escape(shown)}</dd>' in html
