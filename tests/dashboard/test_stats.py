"""The failure statistics against a hand-computed fixture, the page, the API and the CSV."""

from __future__ import annotations

import csv
import io
import sqlite3
from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from dashboard import stats
from dashboard.windows import window_parse
from review.models import ReviewRequest
from tasks.errors import error_fingerprint
from tasks.services import task_transition
from tests.factories import TaskFactory, ToolCallFactory

pytestmark = pytest.mark.django_db


def finish(task, to: str, *, hours_ago: float, error_class: str = "", message: str = ""):
    task_transition(task_id=task.id, to="queued")
    fields = {"error_class": error_class, "error_message": message} if error_class else {}
    if to == "succeeded":
        task_transition(task_id=task.id, to="running")
    task_transition(task_id=task.id, to=to, fields=fields)
    task.__class__.objects.filter(id=task.id).update(
        finished_at=timezone.now() - timedelta(hours=hours_ago)
    )


@pytest.fixture
def fixture():
    """Tasks, tool calls and reviews whose statistics are computed by hand in the tests."""
    now = timezone.now()
    t1, t2, t3, t4, t5, t6 = (TaskFactory() for _ in range(6))
    finish(t1, "failed", hours_ago=1, error_class="budget_exceeded", message="max_steps=5 reached")
    finish(t2, "failed", hours_ago=2, error_class="budget_exceeded", message="max_steps=7 reached")
    finish(
        t3,
        "failed",
        hours_ago=3,
        error_class="timeout",
        message="session timeout: 3600s exceeded (layer: session)",
    )
    finish(t5, "canceled", hours_ago=1, error_class="canceled", message="")
    finish(t6, "failed", hours_ago=72, error_class="timeout", message="old")

    counted = [
        # tool, status, attempts, duration_ms, step_index, error_class
        ("write_file", "succeeded", 1, 10, 0, ""),
        ("write_file", "succeeded", 1, 20, 0, ""),
        ("write_file", "succeeded", 1, 30, 0, ""),
        ("write_file", "failed", 1, 40, 0, "permanent"),
        ("http_request", "succeeded", 3, 100, 1, ""),
        ("http_request", "timed_out", 2, 200, 1, "timeout"),
        ("http_request", "failed", 1, 300, 1, "transient"),
        ("http_request", "succeeded", 1, 400, 1, ""),
        ("read_file", "failed", 0, None, 2, "invalid_arguments"),
    ]
    for tool, status, attempts, duration_ms, step_index, error_class in counted:
        ToolCallFactory(
            task=t4,
            tool=tool,
            status=status,
            attempts=attempts,
            duration_ms=duration_ms,
            step_index=step_index,
            error_class=error_class,
        )
    # Not counted: policy outcomes, calls without an outcome, and calls outside the window.
    ToolCallFactory(task=t4, tool="read_file", status="denied", error_class="denied", step_index=2)
    ToolCallFactory(task=t4, tool="read_file", status="awaiting_review", step_index=2)
    ToolCallFactory(
        task=t4,
        tool="write_file",
        status="failed",
        attempts=1,
        duration_ms=999,
        error_class="permanent",
        created_at=now - timedelta(days=3),
    )
    # After its calls, as a real run finishes: task_transition notes they failed.
    finish(t4, "succeeded", hours_ago=1)

    def review(tool: str, status: str, *, edited=None, hours_ago: float = 1):
        call = ToolCallFactory(task=t4, tool=tool, status="approved")
        return ReviewRequest.objects.create(
            task=t4,
            tool_call=call,
            tool=tool,
            status=status,
            edited_arguments=edited,
            requested_at=now - timedelta(hours=hours_ago),
        )

    review("write_file", "approved")
    review("write_file", "approved", edited={"path": "b.txt"})
    review("write_file", "rejected")
    review("write_file", "expired")
    review("http_request", "pending")
    review("http_request", "rejected", hours_ago=80)
    return {"now": now, "tasks": (t1, t2, t3, t4, t5, t6)}


@pytest.fixture
def window(fixture):
    return window_parse(since="24h", bucket=None, now=timezone.now())


def test_failure_rate_per_tool_counts_settled_calls_only(window):
    assert stats.failure_rate_by_tool(window) == [
        {"tool": "http_request", "calls": 4, "failed": 2, "rate": 0.5},
        {"tool": "read_file", "calls": 1, "failed": 1, "rate": 1.0},
        {"tool": "write_file", "calls": 4, "failed": 1, "rate": 0.25},
    ]


def test_failure_rate_per_step_index(window):
    assert stats.failure_rate_by_step(window) == [
        {"step_index": 0, "calls": 4, "failed": 1, "rate": 0.25},
        {"step_index": 1, "calls": 4, "failed": 2, "rate": 0.5},
        {"step_index": 2, "calls": 1, "failed": 1, "rate": 1.0},
    ]


def test_heatmap_counts_failed_calls_by_tool_and_error_class(window):
    assert stats.error_heatmap(window) == [
        {"tool": "http_request", "error_class": "timeout", "failed": 1},
        {"tool": "http_request", "error_class": "transient", "failed": 1},
        {"tool": "read_file", "error_class": "invalid_arguments", "failed": 1},
        {"tool": "write_file", "error_class": "permanent", "failed": 1},
    ]


def test_retry_distribution_and_success_after_n_retries(window):
    assert stats.retry_distribution(window) == [
        {"retries": 0, "calls": 6, "succeeded": 4, "success_rate": round(4 / 6, 4)},
        {"retries": 1, "calls": 1, "succeeded": 0, "success_rate": 0.0},
        {"retries": 2, "calls": 1, "succeeded": 1, "success_rate": 1.0},
    ]


def test_duration_percentiles_interpolate_like_percentile_cont(window):
    assert stats.duration_percentiles(window) == [
        {"tool": "http_request", "calls": 4, "p50_ms": 250.0, "p95_ms": 385.0},
        {"tool": "write_file", "calls": 4, "p50_ms": 25.0, "p95_ms": 38.5},
    ]


def test_sqlite_percentiles_match_postgresql():
    """The SQLite fallback (window functions) gives percentile_cont's numbers."""
    db = sqlite3.connect(":memory:")
    db.execute(
        'CREATE TABLE "tasks_toolcall" '
        "(task_id TEXT, tool TEXT, duration_ms REAL, created_at TEXT, status TEXT, "
        "error_class TEXT, plan_mark TEXT DEFAULT '')"
    )
    db.execute('CREATE TABLE "tasks_task" (id TEXT, is_replay BOOLEAN)')
    db.executemany('INSERT INTO "tasks_task" VALUES (?, ?)', [("t", 0), ("r", 1)])
    rows = [("a", d, "succeeded", "") for d in (10, 20, 30, 40)] + [
        ("b", d, "succeeded", "") for d in (100, 200, 300, 400, 7)
    ]
    # A call stopped by a cancel: not the tool's duration, left out.
    rows.append(("a", 5000, "failed", "canceled"))
    rows = [("t", *row) for row in rows]
    # A replay's call (answered from its recording): not the tool's duration, left out.
    rows.append(("r", "a", 9000, "succeeded", ""))
    db.executemany("INSERT INTO tasks_toolcall VALUES (?, ?, ?, '2026-01-01', ?, ?, '')", rows)
    # A plan run's dry-run call (never ran): not the tool's duration, left out.
    db.execute(
        "INSERT INTO tasks_toolcall VALUES ('t', 'a', 8000, '2026-01-01', 'succeeded', '', "
        "'planned')"
    )
    sql = stats.sqlite_percentiles_sql(
        table='"tasks_toolcall"', tasks='"tasks_task"', statuses=2
    ).replace("%s", "?")
    result = db.execute(
        sql, ["2025-01-01", "2027-01-01", "succeeded", "failed", "failed", "canceled"]
    ).fetchall()
    # percentile_cont over b = [7, 100, 200, 300, 400]: p50 = 200, p95 = 300 + 0.8 * 100.
    assert [(t, n, round(p50, 6), round(p95, 6)) for t, n, p50, p95 in result] == [
        ("a", 4, 25.0, 38.5),
        ("b", 5, 200.0, 380.0),
    ]


def test_review_outcomes_per_tool_split_edited_from_approved(window):
    assert stats.review_outcomes(window) == [
        {
            "tool": "http_request",
            "approved": 0,
            "edited": 0,
            "rejected": 0,
            "expired": 0,
            "canceled": 0,
            "pending": 1,
        },
        {
            "tool": "write_file",
            "approved": 1,
            "edited": 1,
            "rejected": 1,
            "expired": 1,
            "canceled": 0,
            "pending": 0,
        },
    ]


def test_failure_groups_by_fingerprint(window, fixture):
    t1, t2, t3 = fixture["tasks"][:3]
    groups = stats.failure_groups(window)
    assert [(g["error_class"], g["message"], g["tasks"]) for g in groups] == [
        ("budget_exceeded", "max_steps=<n> reached", 2),
        ("timeout", "session timeout: <n>s exceeded (layer: session)", 1),
    ]
    t1.refresh_from_db()
    t2.refresh_from_db()
    assert groups[0]["fingerprint"] == t1.error_fingerprint == t2.error_fingerprint
    assert groups[0]["fingerprint"] == error_fingerprint("budget_exceeded", "max_steps=9 reached")
    assert groups[0]["first_seen"] < groups[0]["last_seen"]


def test_task_outcomes_in_window(window):
    assert stats.task_outcomes(window) == {
        "succeeded": 1,
        "succeeded_clean": 0,
        "succeeded_after_failed_calls": 1,  # t4's calls failed on the way
        "succeeded_with_rejected_calls": 0,
        "succeeded_with_edited_calls": 0,
        "failed": 3,
        "canceled": 1,
        "failure_rate": 0.75,
        "failure_rate_pct": 75.0,
    }


def test_successes_after_failed_or_retried_calls_are_told_apart_from_clean_ones(
    as_user, viewer, api_client
):
    clean, after_failure, after_retry = (TaskFactory() for _ in range(3))
    for task in (clean, after_failure, after_retry):
        ToolCallFactory(task=task, tool="write_file", status="succeeded", attempts=1)
    ToolCallFactory(
        task=after_failure, tool="read_file", status="failed", attempts=1, error_class="not_found"
    )
    ToolCallFactory(task=after_retry, tool="http_request", status="succeeded", attempts=2)
    for task in (clean, after_failure, after_retry):
        finish(task, "succeeded", hours_ago=1)

    window = window_parse(since="24h", bucket=None, now=timezone.now())
    outcomes = stats.task_outcomes(window)
    assert (outcomes["succeeded"], outcomes["succeeded_clean"]) == (3, 1)
    assert outcomes["succeeded_after_failed_calls"] == 2
    body = api_client(viewer).get("/api/v1/stats/failures", {"since": "24h"}).json()
    assert body["tasks"]["succeeded_after_failed_calls"] == 2
    assert body["tasks"]["succeeded_clean"] == 1
    client = as_user(viewer)
    page = client.get("/stats/failures/").content.decode()
    assert "1 clean, 2 after failed or retried tool calls" in page
    overview = client.get("/").content.decode()
    assert "1 clean · 2 after failed calls" in overview


def test_api_returns_the_statistics(fixture, api_client, viewer):
    response = api_client(viewer).get("/api/v1/stats/failures", {"since": "24h"})
    assert response.status_code == 200
    body = response.json()
    assert body["window"]["bucket"] == "hour"
    assert body["tasks"]["failed"] == 3
    assert {g["message"] for g in body["groups"]} == {
        "max_steps=<n> reached",
        "session timeout: <n>s exceeded (layer: session)",
    }
    assert [d["tool"] for d in body["durations"]] == ["http_request", "write_file"]


def test_api_wider_window_uses_day_buckets_and_includes_older_rows(fixture, api_client, viewer):
    body = api_client(viewer).get("/api/v1/stats/failures", {"since": "7d"}).json()
    assert body["window"]["bucket"] == "day"
    assert body["tasks"]["failed"] == 4


@pytest.mark.parametrize(
    "params, field",
    [
        ({"since": "yesterday"}, "since"),
        ({"since": "24h", "bucket": "week"}, "bucket"),
        ({"since": "90d", "bucket": "hour"}, "bucket"),
        ({"since": "900d"}, "since"),
    ],
)
def test_api_rejects_a_bad_window_with_422_naming_the_field(api_client, viewer, params, field):
    response = api_client(viewer).get("/api/v1/stats/failures", params)
    assert response.status_code == 422
    assert response.json()["errors"][0]["field"] == field


def test_api_requires_authentication(api_client):
    assert api_client(None).get("/api/v1/stats/failures").status_code == 401


def test_page_shows_groups_with_links_to_affected_tasks(fixture, as_user, viewer):
    response = as_user(viewer).get("/stats/failures/?since=24h")
    assert response.status_code == 200
    html = response.content.decode()
    assert "max_steps=&lt;n&gt; reached" in html
    fingerprint = stats.failure_groups(window_parse(since="24h", bucket=None, now=timezone.now()))[
        0
    ]["fingerprint"]
    assert f"fingerprint={fingerprint}" in html
    for chart in ("by-tool", "by-step", "over-time", "heatmap", "retries", "durations", "reviews"):
        assert f'id="chart-{chart}"' in html


def test_affected_tasks_link_lists_exactly_the_group(fixture, as_user, viewer):
    t1, t2 = fixture["tasks"][:2]
    t1.refresh_from_db()
    response = as_user(viewer).get("/tasks/", {"fingerprint": t1.error_fingerprint})
    shown = {str(t.id) for t in response.context["page"].object_list}
    assert shown == {str(t1.id), str(t2.id)}


def test_csv_export_has_a_header_and_one_row_per_group(fixture, as_user, viewer):
    response = as_user(viewer).get("/stats/failures/groups.csv?since=24h")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    rows = list(csv.reader(io.StringIO(response.content.decode())))
    assert rows[0] == ["fingerprint", "error_class", "message", "tasks", "first_seen", "last_seen"]
    assert [(r[1], r[3]) for r in rows[1:]] == [("budget_exceeded", "2"), ("timeout", "1")]


def test_csv_of_an_unknown_table_is_404(as_user, viewer):
    assert as_user(viewer).get("/stats/failures/nope.csv").status_code == 404


def test_statistics_page_query_count_does_not_grow_with_data(
    fixture, as_user, viewer, django_assert_max_num_queries
):
    client = as_user(viewer)
    client.get("/stats/failures/")
    for n in range(30):
        task = TaskFactory()
        finish(task, "failed", hours_ago=0.5, error_class=f"e{n % 5}", message=f"boom {n}")
        ToolCallFactory(
            task=task,
            tool=f"tool{n % 7}",
            status="failed",
            attempts=1 + n % 3,
            duration_ms=n,
            error_class=f"e{n % 4}",
        )
    # The 18th reads the user's time zone, for the layout.
    with django_assert_max_num_queries(18):
        assert client.get("/stats/failures/").status_code == 200


def test_retry_all_in_a_group_is_offered_to_operators_only(fixture, as_user, operator, viewer):
    assert 'data-testid="retry-group"' in as_user(operator).get("/stats/failures/").content.decode()
    assert (
        'data-testid="retry-group"' not in as_user(viewer).get("/stats/failures/").content.decode()
    )


def test_retry_all_in_a_group_confirms_the_groups_failed_tasks(fixture, as_user, operator):
    t1, t2 = fixture["tasks"][:2]
    t1.refresh_from_db()
    window = window_parse(since="24h", bucket=None, now=timezone.now())
    response = as_user(operator).post(
        "/tasks/bulk/",
        {
            "action": "retry",
            "select": "matching",
            "status": "failed",
            "fingerprint": t1.error_fingerprint,
            "finished_from": window.since.isoformat(),
            "finished_to": window.until.isoformat(),
            "next": "/tasks/",
        },
    )
    assert {t["id"] for t in response.context["tasks"]} == {t1.id, t2.id}


def test_recent_points_of_a_24_hour_window_do_not_sit_on_the_right_edge():
    from dashboard import charts

    now = timezone.now()
    window = window_parse(since="24h", bucket=None, now=now)
    bucket = now.replace(minute=0, second=0, microsecond=0)
    rows = [{"tool": "read_file", "bucket": bucket, "calls": 2, "failed": 1, "rate": 0.5}]
    figure = charts.failure_rate_over_time_figure(rows, window)
    lo, hi = (
        datetime.fromisoformat(x).replace(tzinfo=UTC) for x in figure["layout"]["xaxis"]["range"]
    )
    (x,) = (datetime.fromisoformat(x).replace(tzinfo=UTC) for x in figure["data"][0]["x"])
    assert lo < x < hi and (x - lo) / (hi - lo) < 0.75
    assert hi > now  # the hour still going on is inside the chart, not cut at its edge


def test_the_heatmap_cells_are_big_enough_to_read_their_counts():
    from dashboard import charts

    rows = [
        {"tool": tool, "error_class": error, "failed": n}
        for n, (tool, error) in enumerate([("read_file", "not_found"), ("http_get", "timeout")])
    ]
    figure = charts.error_heatmap_figure(rows)
    layout, (heatmap,) = figure["layout"], figure["data"]
    plot_height = layout["height"] - layout["margin"]["t"] - layout["margin"]["b"]
    assert layout["height"] >= 320  # as tall as the charts beside it
    assert plot_height / len(heatmap["y"]) >= 40
    assert heatmap["texttemplate"] == "%{z}"  # each cell shows its count


def test_human_waits_keep_review_time_and_held_time_apart(as_user, viewer, api_client):
    """Through the real transitions: one task waits 10 min for a review, one is held 10 min,
    one waits 10 min for a review and is then held 20 min, one never waits."""
    import time_machine

    reviewed, held, both, neither = tasks = [TaskFactory() for _ in range(4)]

    def move(task, *statuses):
        for to in statuses:
            task_transition(task_id=task.id, to=to)

    with time_machine.travel(timezone.now() - timedelta(hours=2), tick=False) as clock:
        for task in tasks:
            move(task, "queued", "running")
        move(reviewed, "waiting_review")
        move(both, "waiting_review")
        move(held, "stalled", "held")
        clock.shift(timedelta(minutes=10))
        move(reviewed, "queued", "running")
        move(held, "queued", "running")
        move(both, "held")
        clock.shift(timedelta(minutes=20))
        move(both, "queued", "running")
        for task in tasks:
            move(task, "succeeded")

    window = window_parse(since="24h", bucket=None, now=timezone.now())
    waits = {row["kind"]: row for row in stats.human_waits(window)}
    assert (waits["review"]["tasks"], waits["review"]["share"]) == (2, 0.5)
    assert waits["review"]["total_s"] == pytest.approx(1200)
    assert waits["review"]["mean_s"] == pytest.approx(600)
    assert waits["review"]["p50_s"] == pytest.approx(600, rel=0.045)
    assert (waits["held"]["tasks"], waits["held"]["share"]) == (2, 0.5)
    assert waits["held"]["total_s"] == pytest.approx(1800)
    assert waits["held"]["p95_s"] == pytest.approx(1200, rel=0.1)

    body = api_client(viewer).get("/api/v1/stats/failures", {"since": "24h"}).json()
    assert [(w["kind"], w["tasks"], round(w["total_s"])) for w in body["waits"]] == [
        ("review", 2, 1200),
        ("held", 2, 1800),
    ]
    page = as_user(viewer).get("/stats/failures/?since=24h").content.decode()
    assert "waiting for review" in page and "held by an operator" in page
    assert ">20.0 min</td>" in page and ">30.0 min</td>" in page  # in all
    rows = list(
        csv.reader(io.StringIO(as_user(viewer).get("/stats/failures/waits.csv").content.decode()))
    )
    assert rows[0] == ["kind", "tasks", "share", "total_s", "mean_s", "p50_s", "p95_s"]
    assert [(r[0], r[1], r[3]) for r in rows[1:]] == [
        ("review", "2", "1200.0"),
        ("held", "2", "1800.0"),
    ]


def test_human_waits_of_a_window_without_waits_are_empty_not_zero(window):
    waits = stats.human_waits(window)
    assert [(w["kind"], w["tasks"], w["mean_s"], w["p50_s"]) for w in waits] == [
        ("review", 0, None, None),
        ("held", 0, None, None),
    ]


@pytest.mark.parametrize(
    ("rates", "top"),
    [([0.0, 0.0], 10), ([0.5, 0.25], 55), ([1.0], 100)],
)
def test_failure_rates_are_plotted_on_a_percent_axis(rates, top):
    from dashboard import call_charts, charts

    now = timezone.now()
    window = window_parse(since="24h", bucket=None, now=now)
    rows = [
        {"tool": f"t{n}", "step_index": n, "bucket": now, "calls": 4, "failed": 0, "rate": rate}
        for n, rate in enumerate(rates)
    ]
    for figure in (
        charts.failure_rate_by_tool_figure(rows),
        call_charts.failure_rate_by_step_figure(rows),
        charts.failure_rate_over_time_figure(rows, window),
    ):
        axis = figure["layout"]["yaxis"]
        assert axis["ticksuffix"] == "%" and axis["range"][0] == 0
        assert axis["range"][1] == pytest.approx(top)
        shown = sorted(y for trace in figure["data"] for y in trace["y"])
        assert shown == sorted(rate * 100 for rate in rates)


def test_many_steps_share_bars_and_retries_have_room(db):
    """Issue #45 item 8: a rate per step over 100 steps was a row of spikes (one call each),
    and retries one bar; steps are binned to at most 20 bars, a bar on few calls is faint,
    and the retries axis shows 0-3 on a log scale when nearly every call ran once."""
    from dashboard import call_charts

    rows = [
        {"step_index": n, "calls": 1, "failed": n % 2, "rate": float(n % 2)} for n in range(100)
    ]
    (bars,) = call_charts.failure_rate_by_step_figure(rows)["data"]
    assert bars["x"][:2] == ["0–4", "5–9"] and len(bars["x"]) == 20
    assert bars["y"][0] == 40.0 and bars["marker"]["opacity"][0] == 1
    retries = call_charts.retry_distribution_figure(
        [{"retries": 0, "calls": 500, "succeeded": 490, "success_rate": 0.98}]
    )["layout"]
    assert retries["xaxis"]["range"] == [-0.5, 3.5] and "type" not in retries["yaxis"]
