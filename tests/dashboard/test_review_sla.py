"""Review SLAs (`/stats/reviews/`, `GET /api/v1/stats/reviews`, CSV): figures of reviews
opened, viewed, decided after N minutes, edited, expired and with a failed notification, through
the real transitions under time-machine; the rolled figures equal the raw ones."""

from __future__ import annotations

import csv
import io
import os
import re
import threading
from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.db import connection

from review.models import Notification, ReviewDaily, ReviewRequest, ReviewRolledHour
from review.notifications import notification_send
from review.rollups import review_rollups_advance, review_sla, roll
from review.services import review_decide, reviews_expire_overdue
from tasks.canonical import canonical_hash
from tests.conftest import approve, page_client

pytestmark = pytest.mark.django_db(transaction=True)

START = datetime(2026, 11, 30, 10, 10, tzinfo=UTC)
SECRET = "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
CONFIG = """
review_rules:
  - {name: destructive, risk: destructive, action: review, reason: "Deletes data.",
     expires_after: 1h}
notifications:
  channels:
    ops-hook: {kind: webhook, url: "http://127.0.0.1:9/hook", secret_env: OPS_HOOK_SECRET}
  routes:
    - match: {}
      notify: [ops-hook]
"""


def minutes(traveller, n: float) -> None:
    traveller.shift(timedelta(minutes=n))


@pytest.fixture
def reviewed(harness_yaml, paused_review, operator, settings):
    """Five reviews of delete_file (rule `destructive`) opened at START: `viewed` viewed on the
    page after 2 min and approved after 5; `edited` viewed after 1 min and approved with other
    arguments after 3; `api` rejected over the API after 4 min, never viewed; `expired` left to
    expire (its notification failed); `late` still pending when the hours are first rolled."""
    harness_yaml(CONFIG)
    os.environ["OPS_HOOK_SECRET"] = SECRET
    settings.HARNESS_NOTIFY_MAX_ATTEMPTS = 1
    files = {"old.log": "stale\n", "other.log": "x\n"}
    with time_machine.travel(START, tick=False) as traveller:
        try:
            reviews = {name: paused_review(files=files) for name in ("viewed", "edited", "api")}
            reviews["expired"] = paused_review(files=files)
            row = Notification.objects.get(
                review=reviews["expired"], event="review.requested", channel="ops-hook"
            )
            assert notification_send(notification_id=row.id) == "failed"
            reviews["late"] = paused_review(files=files)
        finally:
            del os.environ["OPS_HOOK_SECRET"]
        client = page_client(operator)
        minutes(traveller, 1)
        assert client.get(f"/reviews/{reviews['edited'].id}/").status_code == 200
        minutes(traveller, 1)
        assert client.get(f"/reviews/{reviews['viewed'].id}/").status_code == 200
        client.get(f"/reviews/{reviews['viewed'].id}/")  # a second view changes nothing
        minutes(traveller, 1)
        approve(reviews["edited"], operator, arguments={"path": "other.log"}, via="page")
        minutes(traveller, 1)
        review_decide(review_id=reviews["api"].id, user=operator, decision="reject", via="api")
        minutes(traveller, 1)
        approve(reviews["viewed"], operator, via="page")
        minutes(traveller, 60)
        assert reviews_expire_overdue() >= 1
    return reviews


def test_figures_on_the_page_in_the_api_and_in_the_csv(reviewed, api_client, viewer):
    with time_machine.travel(START + timedelta(hours=3), tick=False):
        body = api_client(viewer).get("/api/v1/stats/reviews", {"since": "24h"}).json()
        page = page_client(viewer).get("/stats/reviews/?since=24h").content.decode()
        csv_text = page_client(viewer).get("/stats/reviews/by_tool.csv?since=24h").content
    # "late" expired too (1h expiry): 5 opened, 3 decided, 2 expired.
    (rule,) = body["by_rule"]
    assert rule["key"] == "destructive"
    assert (rule["opened"], rule["decided"], rule["approved"], rule["rejected"]) == (5, 3, 2, 1)
    assert (rule["expired"], rule["edited"], rule["notifications_failed"]) == (2, 1, 1)
    assert rule["unviewed"] == 1
    # Decisions after 3, 4 and 5 minutes; first views after 1 and 2; on the page 2 and 3
    # (interpolated percentiles, as percentile_cont, of the buckets' middles: within 4.4%).
    assert rule["decision_p50_s"] == pytest.approx(240, rel=0.045)
    assert rule["decision_p95_s"] == pytest.approx(294, rel=0.045)
    assert rule["first_view_p50_s"] == pytest.approx(90, rel=0.045)
    assert rule["on_page_p50_s"] == pytest.approx(150, rel=0.045)
    assert rule["on_page_p95_s"] == pytest.approx(177, rel=0.045)
    assert body["by_tool"][0]["key"] == "delete_file"
    by_operator = {row["key"]: row for row in body["by_operator"]}
    assert by_operator["operator"]["decided"] == 3 and by_operator[""]["expired"] == 2
    by_via = {row["key"]: row for row in body["by_via"]}
    assert (by_via["page"]["decided"], by_via["page"]["unviewed"]) == (2, 0)
    assert (by_via["api"]["decided"], by_via["api"]["unviewed"]) == (1, 1)
    section = page.split('data-testid="sla-rule"')[1].split("</section>")[0]
    cells = dict(re.findall(r'data-col="(\w+)">([^<]*)<', section))
    assert cells["opened"] == "5" and cells["edited"] == "1" and cells["unviewed"] == "1"
    assert cells["notifications_failed"] == "1" and cells["expired"] == "2"
    rows = list(csv.DictReader(io.StringIO(csv_text.decode())))
    assert rows[0]["key"] == "delete_file" and rows[0]["decided"] == "3"
    assert rows[0]["edited"] == "1" and float(rows[0]["decision_p95_s"]) == pytest.approx(
        294, rel=0.045
    )


def test_rolled_figures_equal_raw_figures_and_a_later_change_arrives(
    harness_yaml, paused_review, operator
):
    harness_yaml(CONFIG.split("notifications:")[0].replace("1h", "10h"))
    with time_machine.travel(START, tick=False) as traveller:
        early = paused_review()
        minutes(traveller, 55)
        late = paused_review()
        approve(early, operator, via="page")
        traveller.move_to(START + timedelta(hours=3))
        now = datetime.now(UTC)
        raw = review_sla(since=now - timedelta(hours=24), until=now)
        assert review_rollups_advance(now=now) > 0
        late_hour = ReviewRolledHour.objects.get(hour=late.requested_at.replace(minute=0))
        assert late_hour.pending == 1
        assert review_sla(since=now - timedelta(hours=24), until=now) == raw
        # Viewed and decided after its hour was rolled: the hour is stale, rolled again.
        page_client(operator).get(f"/reviews/{late.id}/")
        minutes(traveller, 1)
        review_decide(
            review_id=late.id,
            user=operator,
            decision="approve",
            arguments_hash=canonical_hash(ReviewRequest.objects.get(pk=late.pk).arguments),
            via="page",
        )
        late_hour.refresh_from_db()
        assert late_hour.stale
        now = datetime.now(UTC)
        raw = review_sla(since=now - timedelta(hours=24), until=now, rolled=False)
        assert raw["rule"][0]["decided"] == 2 and raw["rule"][0]["unviewed"] == 1
        assert review_rollups_advance(now=now) >= 1
        assert review_sla(since=now - timedelta(hours=24), until=now) == raw


def roll_all(now: datetime) -> None:
    while review_rollups_advance(now=now):
        pass


def test_a_window_of_days_reads_the_daily_sums_and_equals_the_raw_figures(
    harness_yaml, paused_review, operator
):
    """Whole UTC days of a window come from the daily sums, the hours around them from the
    hourly rows; a day whose hour is rolled again (a late decision) is summed again."""
    harness_yaml(CONFIG.split("notifications:")[0].replace("1h", "100h"))
    with time_machine.travel(START, tick=False) as traveller:
        opened = []
        for n in range(9):  # every 7 h: over four UTC days
            review = paused_review()
            opened.append(review)
            minutes(traveller, 3)
            if n % 3:
                approve(review, operator, via="page")
            minutes(traveller, 7 * 60 - 3)
        now = datetime.now(UTC)
        roll_all(now)
        assert ReviewDaily.objects.filter(day=datetime(2026, 12, 1, tzinfo=UTC)).exists()
        window = {"since": now - timedelta(days=3, minutes=30), "until": now}
        raw = review_sla(**window, rolled=False)
        assert raw["rule"][0]["opened"] == 9 and raw["rule"][0]["decided"] == 6
        assert review_sla(**window) == raw

        # Decided long after its hour (inside a whole day of the window) was rolled.
        pending = opened[3]
        review_decide(
            review_id=pending.id,
            user=operator,
            decision="approve",
            arguments_hash=canonical_hash(ReviewRequest.objects.get(pk=pending.pk).arguments),
            via="api",
        )
        minutes(traveller, 10)
        now = datetime.now(UTC)
        window = {"since": now - timedelta(days=3, minutes=40), "until": now}
        raw = review_sla(**window, rolled=False)
        assert raw["rule"][0]["decided"] == 7
        roll_all(now)
        assert review_sla(**window) == raw


def test_a_viewer_reads_a_user_in_no_group_does_not(api_client, viewer, outsider):
    assert page_client(viewer).get("/stats/reviews/").status_code == 200
    assert page_client(viewer).get("/stats/reviews/by_rule.csv").status_code == 200
    assert page_client(outsider).get("/stats/reviews/").status_code == 403
    assert page_client(outsider).get("/stats/reviews/by_rule.csv").status_code == 403
    assert api_client(outsider).get("/api/v1/stats/reviews").status_code == 403


@pytest.mark.parametrize("since", ["soon", "900d", "2999-01-01T00:00"])
def test_a_bad_since_is_422_on_the_api_and_a_message_on_the_page(api_client, viewer, since):
    response = api_client(viewer).get("/api/v1/stats/reviews", {"since": since})
    assert response.status_code == 422
    assert response.json()["errors"][0]["field"] == "since"
    page = page_client(viewer).get("/stats/reviews/", {"since": since})
    assert page.status_code == 200 and "since:" in page.content.decode()


def test_a_decision_committed_while_its_hour_is_rolled_reaches_the_next_sweep(
    harness_yaml, paused_review, operator, monkeypatch
):
    """The roll reads the review still pending; the operator's approval commits before the roll
    does. The approval waits for the roll's lock and then marks the fresh hour stale, so the
    very next sweep shows it (not a young-hours re-roll minutes later)."""
    harness_yaml(CONFIG.split("notifications:")[0].replace("1h", "10h"))
    with time_machine.travel(START, tick=False) as traveller:
        review = paused_review()
        traveller.move_to(START + timedelta(hours=3))
        now = datetime.now(UTC)
        decided: list[str] = []
        backend: list[int] = []

        def decide() -> None:
            try:
                with connection.cursor() as cur:
                    cur.execute("SELECT pg_backend_pid()")
                    backend.append(cur.fetchone()[0])
                decided.append(approve(review, operator, via="page").status)
            finally:
                connection.close()

        read_facts = roll.facts
        decider = threading.Thread(target=decide)

        def facts_then_decide(ranges):
            facts = list(read_facts(ranges))  # the roll has read the review as pending
            decider.start()
            # Until the approval committed, or waits on a lock the roll holds.
            for _ in range(600):
                decider.join(timeout=0.05)
                if not decider.is_alive() or _waits_on_a_lock(backend):
                    break
            return facts

        # review_hours_roll reads the facts through the name in its own module.
        monkeypatch.setattr(roll, "facts", facts_then_decide)
        assert review_rollups_advance(now=now) > 0
        monkeypatch.undo()
        decider.join(timeout=30)
        assert decided == ["approved"]
        # The next sweep at the same time: too soon for the young hours' re-roll.
        review_rollups_advance(now=now)
        raw = review_sla(since=now - timedelta(hours=24), until=now, rolled=False)
        assert str(raw["rule"][0]["decided"]) == "1"  # a count (the API says 1, not true)
        assert review_sla(since=now - timedelta(hours=24), until=now) == raw


def _waits_on_a_lock(backend: list[int]) -> bool:
    if not backend:
        return False
    with connection.cursor() as cur:
        cur.execute("SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", backend)
        row = cur.fetchone()
    return row is not None and row[0] == "Lock"
