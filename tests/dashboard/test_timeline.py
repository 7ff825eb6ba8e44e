"""The timeline's figure data matches the task's events, tool calls and checkpoints."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest

from checkpoints.models import Checkpoint
from checkpoints.selectors import task_checkpoint_marks
from tasks import charts
from tasks.models import Task, TaskEvent, ToolCall
from tasks.selectors import task_timeline_events, task_tool_call_attempts

T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def traces(figure) -> dict[str, dict]:
    return {trace["name"]: trace for trace in figure["data"]}


def timeline_of(task: Task) -> dict:
    return charts.task_timeline(
        task=task,
        events=task_timeline_events(task=task, types=charts.TIMELINE_EVENT_TYPES),
        calls=task_tool_call_attempts(task=task),
        checkpoints=task_checkpoint_marks(task_id=task.id),
        now=at(0),
    )


@pytest.mark.django_db
def test_bars_match_a_real_runs_events_tool_calls_and_checkpoints(run_task):
    task = run_task(
        [
            {"call": "write_file", "args": {"path": "a.txt", "content": "hi"}},
            {"call": "flaky", "args": {"key": "tl", "fail_times": 1, "error": "permanent"}},
            {
                "calls": [
                    {"call": "read_file", "args": {"path": "a.txt"}},
                    {"call": "read_file", "args": {"path": "nope.txt"}},
                ]
            },
            {"final": "done"},
        ],
        ["write_file", "read_file", "flaky"],
    )
    assert task.status == "succeeded"
    figure = timeline_of(task)
    by_name = traces(figure)

    decisions = TaskEvent.objects.filter(task=task, type="model_decision")
    assert len(by_name["model calls"]["x"]) == decisions.count() == 4
    assert len(by_name["steps"]["x"]) == len({e.step_index for e in decisions}) == 4

    calls = list(ToolCall.objects.filter(task=task))
    attempts = [a for c in calls for a in c.attempt_log]
    tool_bars = by_name["tool attempts"]
    assert Counter(tool_bars["y"]) == Counter(
        charts.tool_row(c.tool) for c in calls for _ in c.attempt_log
    )
    assert len(tool_bars["x"]) == len(attempts) == 4
    failed = [a for a in attempts if a["status"] != "succeeded"]
    assert len(by_name["errors"]["x"]) == len(failed) == 2

    marks = Counter()
    for trace in figure["data"]:
        if trace["meta"]["kind"] == "checkpoints":
            marks[trace["meta"]["level"]] += len(trace["x"])
    assert marks == Counter(Checkpoint.objects.filter(task=task).values_list("level", flat=True))


def test_every_attempt_is_a_bar_and_failed_attempts_are_marked():
    task = Task(status="failed")
    attempts = [
        # started, finished (seconds), status, error class, error message
        (1, 2, "failed", "transient", "HTTP 503"),
        (5, 6, "timed_out", "timeout", "slow"),
        (9, 9.5, "succeeded", "", ""),
    ]
    log = [
        {
            "n": n,
            "started_at": at(started).isoformat(),
            "finished_at": at(finished).isoformat(),
            "status": outcome,
            "error_class": error_class,
            "error_message": message,
        }
        for n, (started, finished, outcome, error_class, message) in enumerate(attempts, 1)
    ]
    call = {
        "call_id": "0.0.0",
        "tool": "http_request",
        "status": "succeeded",
        "step_index": 0,
        "attempts": 3,
        "attempt_log": log,
        "started": at(9).isoformat(),
    }
    figure = charts.task_timeline(task=task, events=[], calls=[call], checkpoints=[], now=at(20))
    bars = traces(figure)["tool attempts"]
    assert bars["x"] == [1000.0, 1000.0, 500.0]
    assert bars["base"][0] == "2026-01-01 12:00:01.000000"
    assert bars["marker"]["color"] == [
        charts.STATUS_COLORS["failed"],
        charts.STATUS_COLORS["timed_out"],
        charts.STATUS_COLORS["succeeded"],
    ]
    assert traces(figure)["errors"]["x"] == [
        "2026-01-01 12:00:02.000000",
        "2026-01-01 12:00:06.000000",
    ]
    assert traces(figure)["steps"]["x"] == [8500.0]


def status(seconds: float, frm: str, to: str, n: int) -> dict:
    return {
        "id": n,
        "type": "status",
        "step_index": 0,
        "at": at(seconds).isoformat(),
        "from": frm,
        "to": to,
        "reason": "",
        "duration_ms": None,
    }


def test_waiting_for_a_human_is_a_shaded_span_until_the_decision():
    events = [
        status(0, "queued", "running", 1),
        status(10, "running", "waiting_review", 2),
        status(70, "waiting_review", "queued", 3),
        status(71, "queued", "running", 4),
        status(80, "running", "waiting_review", 5),
    ]
    figure = charts.task_timeline(
        task=Task(status="waiting_review"), events=events, calls=[], checkpoints=[], now=at(100)
    )
    human = traces(figure)["waiting for review"]
    # The closed wait (10 s -> 70 s) and the open one, shaded up to now.
    assert human["x"] == [60000.0, 20000.0]
    assert [(s["x0"], s["x1"]) for s in figure["layout"]["shapes"] if s["type"] == "rect"] == [
        ("2026-01-01 12:00:10.000000", "2026-01-01 12:01:10.000000"),
        ("2026-01-01 12:01:20.000000", "2026-01-01 12:01:40.000000"),
    ]


def cp(seq: int, seconds: float, level: str, *, superseded: bool = False) -> dict:
    return {
        "id": seq,
        "seq": seq,
        "level": level,
        "trigger": "after_step",
        "step_index": seq,
        "superseded": superseded,
        "at": at(seconds).isoformat(),
    }


def test_checkpoints_are_markers_by_level_and_superseded_ones_are_dimmed():
    checkpoints = [
        cp(1, 1, "task"),
        cp(2, 2, "step"),
        cp(3, 3, "tool", superseded=True),
        cp(4, 4, "step", superseded=True),
        cp(5, 5, "step"),
    ]
    decision = {
        "id": 1,
        "type": "model_decision",
        "step_index": 1,
        "at": at(3.5).isoformat(),
        "duration_ms": 100,
        "turn": 2,
        "prompt_tokens": 1,
        "completion_tokens": 1,
    }
    figure = charts.task_timeline(
        task=Task(status="succeeded"),
        events=[decision],
        calls=[],
        checkpoints=checkpoints,
        now=at(9),
    )
    by_name = traces(figure)
    assert len(by_name["checkpoints · step"]["x"]) == 2
    assert (
        by_name["checkpoints · step (superseded)"]["marker"]["opacity"] == charts.SUPERSEDED_OPACITY
    )
    assert by_name["checkpoints · tool (superseded)"]["meta"]["level"] == "tool"
    # The model call made on the abandoned branch (between seq 2 and the rollback's seq 5).
    assert by_name["model calls"]["marker"]["opacity"] == [charts.SUPERSEDED_OPACITY]


def test_a_running_call_without_a_finished_attempt_is_an_open_bar_to_now():
    call = {
        "call_id": "0.1.0",
        "tool": "sleep",
        "status": "running",
        "step_index": 1,
        "attempts": 1,
        "attempt_log": [],
        "started": at(10).isoformat(),
    }
    figure = charts.task_timeline(
        task=Task(status="running"), events=[], calls=[call], checkpoints=[], now=at(13)
    )
    assert traces(figure)["tool attempts"]["x"] == [3000.0]


def model(seconds: float, n: int) -> dict:
    return {
        **status(seconds, None, None, n),
        "type": "model_decision",
        "duration_ms": 1000,
        "turn": n,
        "prompt_tokens": 1,
        "completion_tokens": 1,
    }


def test_a_long_review_wait_is_cut_out_of_the_axis_with_a_labelled_break():
    events = [
        status(0, "queued", "running", 1),
        model(2, 1),
        status(5, "running", "waiting_review", 2),
        status(4 * 3600 + 5, "waiting_review", "queued", 3),
        status(4 * 3600 + 6, "queued", "running", 4),
        model(4 * 3600 + 8, 5),
    ]
    figure = charts.task_timeline(
        task=Task(status="running"), events=events, calls=[], checkpoints=[], now=at(4 * 3600 + 9)
    )
    (cut,) = figure["layout"]["xaxis"]["rangebreaks"]
    lo, hi = (datetime.fromisoformat(b).replace(tzinfo=UTC) for b in cut["bounds"])
    assert at(2) < lo < at(10) and at(4 * 3600) < hi < at(4 * 3600 + 8)
    (label,) = figure["layout"]["annotations"]
    assert label["text"] == "⋯ 4 h 0 min waiting for review ⋯"
    # Short pauses stay on the axis.
    quick = charts.task_timeline(
        task=Task(status="running"), events=events[:3], calls=[], checkpoints=[], now=at(6)
    )
    assert quick["layout"]["xaxis"]["rangebreaks"] == []


def axis_seconds(figure) -> float:
    """Seconds of time the x axis shows: its range less the spans cut out of it."""
    xaxis = figure["layout"]["xaxis"]
    lo, hi = (datetime.fromisoformat(x) for x in xaxis["range"])
    cut = sum(
        (datetime.fromisoformat(b) - datetime.fromisoformat(a)).total_seconds()
        for a, b in (r["bounds"] for r in xaxis["rangebreaks"])
    )
    return (hi - lo).total_seconds() - cut


def test_a_quick_task_held_after_a_four_hour_wait_keeps_its_work_readable():
    # 50 ms of work, four hours waiting for a review, rolled back to a hold three seconds ago.
    wait = 4 * 3600
    events = [
        status(0, "queued", "running", 1),
        {**model(0.03, 2), "duration_ms": 20},
        {**model(0.06, 3), "duration_ms": 20},
        status(0.07, "running", "waiting_review", 4),
        {**status(wait, None, None, 5), "type": "rollback", "actor": "ops", "from_seq": 1},
        status(wait, "waiting_review", "held", 6),
    ]
    figure = charts.task_timeline(
        task=Task(status="held"), events=events, calls=[], checkpoints=[], now=at(wait + 3)
    )
    labels = [a["text"] for a in figure["layout"]["annotations"]]
    assert labels == ["⋯ 4 h 0 min waiting for review ⋯", "⋯ 3.0 s held ⋯"]
    # The work (first model call's start to the last one's end) is not a sliver of the axis.
    assert 0.05 / axis_seconds(figure) >= charts.WORK_SHARE
    # Labels of breaks a few pixels apart do not sit on top of each other.
    assert [a["yshift"] for a in figure["layout"]["annotations"]] == [0, 16]


def test_rollbacks_holds_retries_and_redispatches_are_marks_of_their_own():
    def event(seconds: float, kind: str, eid: int, **payload) -> dict:
        return {**status(seconds, None, None, eid), "type": kind, "actor": "ops", **payload}

    events = [
        status(0, "queued", "running", 1),
        event(1, "retry_scheduled", 2, error_class="timeout"),
        event(2, "redispatched", 3),
        event(3, "rollback", 4, from_seq=3, reason="bad write"),
        status(3, "failed", "held", 5),
    ]
    figure = charts.task_timeline(
        task=Task(status="held"), events=events, calls=[], checkpoints=[], now=at(4)
    )
    names = traces(figure)
    assert names["rollbacks"]["hovertext"] == ["rollback to checkpoint #3 by ops: bad write"]
    assert names["retries"]["hovertext"] == ["retry scheduled after timeout"]
    assert names["redispatches"]["hovertext"] == ["redispatched by ops"]
    assert names["holds"]["y"] == ["recovery"]
    assert "held" in names  # the hold is a span of its own, not review time


def test_held_time_is_not_review_time():
    from tasks.selectors import task_wait_times

    events = [
        {"type": "status", "at": at(0).isoformat(), "to": "running"},
        {"type": "status", "at": at(10).isoformat(), "to": "waiting_review"},
        {"type": "status", "at": at(40).isoformat(), "to": "queued"},
        {"type": "status", "at": at(50).isoformat(), "to": "failed"},
        {"type": "status", "at": at(60).isoformat(), "to": "held"},
        {"type": "status", "at": at(260).isoformat(), "to": "queued"},
        {"type": "status", "at": at(270).isoformat(), "to": "held"},
    ]
    assert task_wait_times(events, now=at(280)) == {"review": 30.0, "held": 210.0}
