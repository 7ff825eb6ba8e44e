"""The task page: header, timeline data, tabs, live polling and the JSON download."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import pytest

from review.models import ReviewRequest
from tasks import charts
from tasks.models import TaskEvent, ToolCall
from tests.factories import TaskFactory, ToolCallFactory

pytestmark = pytest.mark.django_db

SCRIPT = [
    {"call": "write_file", "args": {"path": "a.txt", "content": "hi"}},
    {"call": "read_file", "args": {"path": "missing.txt"}},
    {"final": "done"},
]
TOOLS = ["write_file", "read_file"]


def test_header_shows_status_step_budget_worker_and_attempts(as_user, viewer, run_task):
    task = run_task(SCRIPT, TOOLS, budget={"max_steps": 9, "max_tokens": 5000})
    html = as_user(viewer).get(f"/tasks/{task.id}/").content.decode()
    assert 'data-testid="task-status">succeeded<' in html
    assert f"{task.steps_used} / 9" in html and f"{task.tokens_used} / 5000" in html
    assert 'data-testid="task-runs">1</dd>' in html
    assert 'id="timeline-data"' in html


def test_runs_are_split_into_the_start_resumes_and_retries(as_user, viewer):
    """Issue #45 item 8: "Attempts 5" counted resumes and read like retries."""
    task = TaskFactory(status="succeeded", attempt=5, retry_count=1)
    html = as_user(viewer).get(f"/tasks/{task.id}/").content.decode()
    runs = html.split('data-testid="task-runs">')[1].split("</dd>")[0]
    assert runs == "5 (1 start · 3 resumed after a pause · 1 retried)"


def test_timeline_data_is_embedded_in_the_page(as_user, viewer, run_task):
    task = run_task(SCRIPT, TOOLS)
    response = as_user(viewer).get(f"/tasks/{task.id}/")
    names = {t["name"] for t in response.context["timeline"]["data"]}
    assert {"steps", "model calls", "tool attempts", "errors"} <= names


def test_compact_events_fold_each_call_into_one_row(as_user, viewer, run_task):
    task = run_task(SCRIPT, TOOLS)
    response = as_user(viewer).get(f"/tasks/{task.id}/", {"tab": "events"})
    rows = response.context["rows"]
    calls = [r for r in rows if r["call"]]
    assert [(r["tool"], r["stages"]) for r in calls] == [
        ("write_file", ["proposed", "running", "succeeded"]),
        ("read_file", ["proposed", "running", "failed"]),
    ]
    folded = TaskEvent.objects.filter(task=task, type__in=["tool_started", "tool_finished"])
    assert len(rows) == TaskEvent.objects.filter(task=task).count() - folded.count() + 2
    assert "write_file</strong>" in response.content.decode()


def test_full_frame_log_lists_every_event(as_user, viewer, run_task):
    task = run_task(SCRIPT, TOOLS)
    response = as_user(viewer).get(f"/tasks/{task.id}/", {"tab": "events", "view": "frames"})
    assert [e.id for e in response.context["page"].object_list] == list(
        TaskEvent.objects.filter(task=task).order_by("id").values_list("id", flat=True)
    )


def test_tab_requested_by_htmx_returns_only_the_fragment(as_user, viewer, run_task):
    task = run_task(SCRIPT, TOOLS)
    response = as_user(viewer).get(
        f"/tasks/{task.id}/", {"tab": "calls"}, headers={"HX-Request": "true"}
    )
    html = response.content.decode()
    assert "<html" not in html and 'data-testid="tab-calls"' in html
    assert "missing.txt: no such file" in html


def test_tool_calls_tab_lists_every_attempt_with_its_error(as_user, viewer):
    task = TaskFactory(status="failed")
    ToolCallFactory(
        task=task,
        tool="http_request",
        status="succeeded",
        attempts=2,
        attempt_log=[
            {
                "n": 1,
                "started_at": "2026-01-01T00:00:00+00:00",
                "status": "failed",
                "error_class": "transient",
                "error_message": "HTTP 503 first",
            },
            {
                "n": 2,
                "started_at": "2026-01-01T00:00:05+00:00",
                "status": "succeeded",
                "error_class": "",
                "error_message": "",
            },
        ],
    )
    html = as_user(viewer).get(f"/tasks/{task.id}/", {"tab": "calls"}).content.decode()
    assert "transient: HTTP 503 first" in html
    assert html.count('data-testid="attempt"') == 2


def test_reviews_tab_lists_the_tasks_reviews(as_user, viewer, operator):
    from django.utils import timezone

    task = TaskFactory(status="waiting_review")
    call = ToolCallFactory(task=task, tool="write_file", status="awaiting_review")
    ReviewRequest.objects.create(
        task=task,
        tool_call=call,
        tool="write_file",
        status="rejected",
        decided_by=operator,
        comment="too risky",
        requested_at=timezone.now(),
        decided_at=timezone.now(),
    )
    html = as_user(viewer).get(f"/tasks/{task.id}/", {"tab": "reviews"}).content.decode()
    assert "too risky" in html and "by operator" in html


def test_checkpoints_tab_verifies_checksums_of_the_page_shown(as_user, viewer, run_task):
    task = run_task(SCRIPT, TOOLS)
    response = as_user(viewer).get(f"/tasks/{task.id}/", {"tab": "checkpoints"})
    assert [ok for _, ok in response.context["checkpoints"]] == [True] * task.checkpoints.count()


def test_events_download_is_the_full_frame_log_as_json(as_user, viewer, run_task):
    task = run_task(SCRIPT, TOOLS)
    response = as_user(viewer).get(f"/tasks/{task.id}/events.json")
    assert response["Content-Disposition"].startswith("attachment;")
    frames = json.loads(b"".join(response.streaming_content))
    assert [f["seq"] for f in frames] == list(
        TaskEvent.objects.filter(task=task).order_by("id").values_list("id", flat=True)
    )
    assert frames[-1]["payload"]["to"] == "succeeded"


def test_live_fragment_polls_while_active_and_stops_when_terminal(as_user, viewer):
    task = TaskFactory(status="running")
    client = as_user(viewer)
    assert (
        'hx-trigger="every 2s" data-live-poll'
        in client.get(f"/tasks/{task.id}/live/").content.decode()
    )
    task.__class__.objects.filter(id=task.id).update(status="succeeded")
    html = client.get(f"/tasks/{task.id}/live/").content.decode()
    assert "hx-trigger" not in html and 'id="timeline-data"' in html


def test_unknown_task_is_404(as_user, viewer):
    assert as_user(viewer).get("/tasks/00000000-0000-0000-0000-000000000000/").status_code == 404


def test_task_page_query_count_does_not_grow_with_steps(
    as_user, viewer, run_task, django_assert_max_num_queries
):
    client = as_user(viewer)
    small = run_task([{"call": "list_files", "args": {}}, {"final": "x"}], ["list_files"])
    big = run_task(
        [{"call": "list_files", "args": {}}] * 12 + [{"final": "x"}],
        ["list_files"],
        budget={"max_steps": 100},
    )
    assert ToolCall.objects.filter(task=big).count() == 12
    client.get(f"/tasks/{small.id}/")
    # 17: the 15th reads the newest event id, for the live parts' ETags; the 16th the user's
    # time zone, for the layout; the 17th the task's family of forks (cases.family).
    with django_assert_max_num_queries(17) as small_queries:
        client.get(f"/tasks/{small.id}/")
    with django_assert_max_num_queries(len(small_queries)):
        client.get(f"/tasks/{big.id}/")
    # The calls tab reads its page's outputs (tasks.outputs) in one query more.
    for tab, bound in (("calls", 18), ("reviews", 17), ("checkpoints", 17)):
        with django_assert_max_num_queries(bound):
            client.get(f"/tasks/{big.id}/", {"tab": tab})


def test_seq_opens_the_checkpoints_page_holding_that_checkpoint(as_user, viewer):
    from django.utils import timezone

    from checkpoints.models import Checkpoint

    task = TaskFactory(status="succeeded")
    Checkpoint.objects.bulk_create(
        Checkpoint(
            task=task,
            seq=n,
            level="step",
            trigger="after_step",
            payload=b"x",
            checksum="0",
            created_at=timezone.now(),
        )
        for n in range(1, 251)
    )
    response = as_user(viewer).get(f"/tasks/{task.id}/", {"tab": "checkpoints", "seq": 150})
    assert response.context["page"].number == 2
    assert 'id="checkpoint-150"' in response.content.decode()


def test_a_held_task_that_never_failed_is_offered_resume_not_retry(as_user, operator):
    held = TaskFactory(status="held")
    failed = TaskFactory(status="failed", error_class="timeout", error_message="slow")
    client = as_user(operator)
    page = client.get(f"/tasks/{held.id}/").content.decode()
    assert 'value="resume"' in page and "Retry failed step" not in page
    assert "Retry failed step" in client.get(f"/tasks/{failed.id}/").content.decode()


def test_a_tool_call_is_created_before_it_starts_and_finishes(api_client, operator, run_task):
    # A read-only call's row is written only with its outcome: its created_at is still the
    # time the model proposed it, not the write's.
    script = [{"call": "sleep", "args": {"seconds": 0.05}}, *SCRIPT]
    task = run_task(script, ["sleep", *TOOLS])
    calls = api_client(operator).get(f"/api/v1/tasks/{task.id}/tool-calls").json()
    assert [c["tool"] for c in calls] == ["sleep", "write_file", "read_file"]
    for call in calls:
        times = [
            datetime.fromisoformat(call[k]) for k in ("created_at", "started_at", "finished_at")
        ]
        assert times == sorted(times), call["call_id"]


# Steps 0-1 write and fail to read, then ten steps of listing: with a timeline of the last
# four steps, the failed read is of a collapsed step.
LONG = [
    {"call": "write_file", "args": {"path": "a.txt", "content": "hi"}},
    {"call": "read_file", "args": {"path": "missing.txt"}},
    *({"call": "list_files", "args": {}} for _ in range(10)),
    {"final": "done"},
]


def drawn(figure: dict, name: str) -> list[dict]:
    """The traces of `name` (a collapsed timeline splits one over two axes)."""
    return [trace for trace in figure["data"] if trace["name"] == name]


def test_a_long_tasks_timeline_draws_its_last_steps_and_keeps_the_earlier_failures(
    as_user, viewer, run_task, monkeypatch
):
    # The view reads charts.TIMELINE_STEPS; timeline_from_step reads it in its module.
    monkeypatch.setattr(charts, "TIMELINE_STEPS", 4)
    monkeypatch.setattr(charts.scope, "TIMELINE_STEPS", 4)
    task = run_task(LONG, [*TOOLS, "list_files"], budget={"max_steps": 50})
    steps = TaskEvent.objects.filter(task=task, type="model_decision").count()
    assert task.current_step > 4 and steps > 4
    client = as_user(viewer)
    page = client.get(f"/tasks/{task.id}/")
    figure = page.context["timeline"]
    (step_bars,) = drawn(figure, "steps")
    assert len(step_bars["x"]) == 4 and "xaxis" not in step_bars
    # The failed read of step 1 is an ✕ on the overview axis of the collapsed steps, and it
    # opens its call.
    (early,) = [t for t in drawn(figure, "errors") if t.get("xaxis") == "x2"]
    read = ToolCall.objects.get(task=task, tool="read_file")
    assert any("read_file #2 (step 1)" in text for text in early["hovertext"])
    assert any(read.call_id in link for link in early["customdata"])
    assert figure["layout"]["xaxis2"]["title"]["text"].startswith("steps 0–")
    html = page.content.decode()
    assert f'hx-get="/tasks/{task.id}/live/?timeline=all"' in html
    assert 'data-testid="timeline-show-all"' in html
    assert any("collapsed" in item for item in page.context["timeline_summary"]["items"])

    # "Show all steps": the live fragment with every step, and the note to collapse again.
    everything = client.get(f"/tasks/{task.id}/live/?timeline=all", HTTP_HX_REQUEST="true")
    assert everything.status_code == 200
    full = everything.context["timeline"]
    assert sum(len(t["x"]) for t in drawn(full, "steps")) == steps
    assert "xaxis2" not in full["layout"]
    assert all("xaxis" not in t for t in full["data"])
    assert 'data-testid="timeline-show-last"' in everything.content.decode()
    # The model usage counts every step either way.
    usage = page.context["model_usage"]
    assert (usage["calls"], usage["steps_in_all"]) == (steps, steps)
    assert everything.context["model_usage"]["calls"] == steps
    # Without JavaScript the link opens the page with every step.
    plain = client.get(f"/tasks/{task.id}/", {"timeline": "all"}).context["timeline"]
    assert sum(len(t["x"]) for t in drawn(plain, "steps")) == steps


def test_timeline_axis_follows_the_zone_chosen_in_preferences(as_user, viewer, run_task):
    task = run_task(SCRIPT, TOOLS)
    client = as_user(viewer)

    def timeline() -> dict:
        return client.get(f"/tasks/{task.id}/").context["timeline"]

    def bases(figure: dict) -> list[datetime]:
        bars = [t for t in figure["data"] if t["name"] in {"steps", "tool attempts"}]
        return [datetime.fromisoformat(base) for t in bars for base in t["base"]]

    in_utc = timeline()
    assert in_utc["layout"]["xaxis"]["title"]["text"].startswith("time (UTC)")
    assert client.post("/preferences/", {"time_zone": "Asia/Kolkata"}).status_code == 302
    in_kolkata = timeline()
    assert in_kolkata["layout"]["xaxis"]["title"]["text"].startswith("time (Asia/Kolkata)")
    # Every bar starts 5 h 30 min later on the clock: the same instants, in the chosen zone.
    before, after = bases(in_utc), bases(in_kolkata)
    assert before and len(after) == len(before)
    assert {b - a for a, b in zip(before, after, strict=True)} == {timedelta(hours=5, minutes=30)}
    hover = " ".join(" ".join(t.get("hovertext") or []) for t in in_kolkata["data"])
    assert " UTC" not in hover


def test_the_failure_charts_over_time_are_drawn_in_the_chosen_zone(as_user, viewer):
    """Issue #45 item 5: the overview's and the statistics' chart over time name the zone."""
    from dashboard.models import UserPreference

    UserPreference.objects.create(user=viewer, time_zone="Asia/Kolkata")
    ToolCallFactory(status="failed", error_class="transient")
    client = as_user(viewer)
    overview = client.get("/", {"since": "24h"}).context["over_time_figure"]
    assert overview["layout"]["xaxis"]["title"]["text"] == "hour (Asia/Kolkata)"
    stats = client.get("/stats/failures/", {"since": "24h"}).context["figures"]["over_time"]
    assert stats["layout"]["xaxis"]["title"]["text"] == "hour (Asia/Kolkata)"


@pytest.mark.django_db(transaction=True)
def test_a_rejected_call_has_a_mark_in_its_timeline_lane(as_user, viewer, paused_review, operator):
    """Issue #45 item 8: a rejected call never ran, so it had no bar and its lane was empty."""
    from review.services import review_decide

    review = paused_review()
    review_decide(review_id=review.id, user=operator, decision="reject", comment="no")
    html = as_user(viewer).get(f"/tasks/{review.task_id}/").content.decode()
    data = html.split('id="timeline-data"')[1].split("</script>")[0]
    assert "delete_file #1 (step 0)" in data and "rejected: it never ran" in data
