"""Review SLA targets (issue #45 item 6): a rule's `sla: {decide_within}` in harness.yaml
(else `review_sla`); reviews decided or expired later, or open past it, are breaches on the SLA
page (highlight, tables, the series from the roll-ups), in the API and in /metrics."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
import time_machine

from review.rollups import review_rollups_advance, review_sla, review_sla_series
from review.services import reviews_expire_overdue
from tests.conftest import approve, page_client

pytestmark = pytest.mark.django_db(transaction=True)

START = datetime(2026, 11, 30, 10, 10, tzinfo=UTC)
CONFIG = """
review_sla: {decide_within: 1h}
review_rules:
  - {name: destructive, risk: destructive, action: review, reason: "Deletes data.",
     expires_after: 10h, sla: {decide_within: 2m}}
"""


@pytest.fixture
def late_and_on_time(harness_yaml, paused_review, operator):
    """Opened at START under `destructive` (target 2 min): `quick` approved after 1 min,
    `slow` after 7 min 26 s, `open` still pending three hours later."""
    harness_yaml(CONFIG)
    with time_machine.travel(START, tick=False) as traveller:
        reviews = {name: paused_review() for name in ("quick", "slow", "open")}
        traveller.shift(timedelta(minutes=1))
        approve(reviews["quick"], operator, via="page")
        traveller.shift(timedelta(minutes=6, seconds=26))
        approve(reviews["slow"], operator, via="page")
    return reviews


def test_breaches_on_the_page_in_the_api_and_in_the_series(late_and_on_time, api_client, viewer):
    at = START + timedelta(hours=3)
    with time_machine.travel(at, tick=False):
        body = api_client(viewer).get("/api/v1/stats/reviews", {"since": "24h"}).json()
        page = page_client(viewer).get("/stats/reviews/?since=24h").content.decode()
    (rule,) = body["by_rule"]
    assert (rule["key"], rule["target_s"], rule["breached"]) == ("destructive", 120, 1)
    assert body["breached"] == 1 and body["target_s"] == 3600
    (late,) = body["past_target"]
    assert late["id"] == late_and_on_time["open"].id and late["target_s"] == 120
    assert late["waited_s"] == 3 * 3600
    (point,) = body["series"]
    assert point["bucket"].startswith("2026-11-30T10:00")
    assert (point["opened"], point["breached"], point["still_open"]) == (3, 1, 1)

    highlight = page.split('data-testid="sla-breaches"')[1].split("</section>")[0]
    assert "sla-breach" in page.split('data-testid="sla-breaches"')[0][-200:]
    assert re.search(r'sla-open-late">1<', highlight) and re.search(r'decided-late">1<', highlight)
    assert f"/reviews/{late['id']}/" in highlight and "3 h 0 min" in highlight
    section = page.split('data-testid="sla-rule"')[1].split("</section>")[0]
    cells = dict(re.findall(r'data-col="(\w+)">([^<]*)<', section))
    assert cells["target"] == "2 min 0 s" and cells["breached"] == "1"
    # Durations read in units ("7 min 26 s" within the histogram's 4.4%), not "445.6".
    assert re.fullmatch(r"\d+ min \d+ s / [67] min \d+ s", cells["decision"]), cells
    assert 'class="breach"' in section
    assert 'id="chart-sla-decision"' in page and 'id="chart-sla-backlog"' in page


def test_the_series_from_the_rollups_equals_the_series_from_the_reviews(late_and_on_time, operator):
    with time_machine.travel(START + timedelta(days=2, hours=3), tick=False):
        now = datetime.now(UTC)
        window = {"since": now - timedelta(days=3), "until": now}
        raw = {bucket: review_sla_series(**window, bucket=bucket) for bucket in ("hour", "day")}
        assert raw["day"][0]["bucket"] == datetime(2026, 11, 30, tzinfo=UTC)
        assert raw["day"][0]["breached"] == 1 and raw["day"][0]["still_open"] == 1
        while review_rollups_advance(now=now):
            pass
        assert {b: review_sla_series(**window, bucket=b) for b in raw} == raw
        assert review_sla(**window) == review_sla(**window, rolled=False)


def test_a_rule_without_a_target_has_the_default_and_an_expiry_past_it_breaches(
    harness_yaml, paused_review
):
    harness_yaml(CONFIG.replace(", sla: {decide_within: 2m}", "").replace("10h", "90m"))

    with time_machine.travel(START, tick=False) as traveller:
        paused_review()
        traveller.shift(timedelta(hours=2))
        assert reviews_expire_overdue() == 1
        now = datetime.now(UTC)
        (rule,) = review_sla(since=now - timedelta(hours=24), until=now, rolled=False)["rule"]
    assert (rule["expired"], rule["breached"]) == (1, 1)
