"""The timeline's words: a call is named by its tool, number and step, a checkpoint by its
step and the call it was taken before; hover says the tool, arguments, outcome, duration,
attempt and error; a review wait is drawn from the pause to the decision, never from inside a
span cut out of the axis; and the text alternative says what the chart shows."""

from __future__ import annotations

from tasks import charts
from tasks.models import Task
from tests.dashboard.test_timeline import at, model, status, traces


def attempt(n: int, started: float, finished: float, outcome: str, error: str = "") -> dict:
    return {
        "n": n,
        "started_at": at(started).isoformat(),
        "finished_at": at(finished).isoformat(),
        "status": outcome,
        "error_class": "transient" if error else "",
        "error_message": error,
    }


def call(number_in_log: int, tool: str, step: int, log: list[dict], **extra) -> dict:
    return {
        "call_id": f"0.{step}.{number_in_log}",
        "tool": tool,
        "status": log[-1]["status"] if log else "proposed",
        "step_index": step,
        "attempts": len(log),
        "attempt_log": log,
        "started": log[-1]["started_at"] if log else None,
        "arguments_text": '{"path": "a.txt", "content": "hi"}',
        **extra,
    }


def test_a_failed_attempts_hover_names_the_call_its_arguments_attempt_and_error():
    calls = [
        call(0, "read_file", 0, [attempt(1, 1, 1.2, "succeeded")]),
        call(
            0,
            "write_file",
            2,
            [
                attempt(1, 3, 3.5, "failed", error="<a href='https://evil.example/'>503</a>"),
                attempt(2, 4, 4.1, "succeeded"),
            ],
            arguments_text='{"path": "<b>x</b>.txt", "content": "' + "y" * 500 + '"}',
        ),
    ]
    figure = charts.task_timeline(
        task=Task(status="succeeded"), events=[], calls=calls, checkpoints=[], now=at(9)
    )
    failed = traces(figure)["tool attempts"]["hovertext"][1]
    lines = failed.split("<br>")
    assert lines[0] == "write_file #2 (step 2)"
    assert lines[1] == "attempt 1 of 2 · failed · 500 ms"
    assert lines[2].startswith('arguments: {"path": "&lt;b&gt;x&lt;/b&gt;.txt", "content": "yyy')
    assert len(lines[2]) <= len("arguments: ") + charts.ARGUMENTS_CHARS + 40  # escaped, bounded
    assert lines[3] == "error: transient: &lt;a href='https://evil.example/'&gt;503&lt;/a&gt;"
    assert lines[4] == "call id 0.2.0"
    # The error mark says the same.
    assert traces(figure)["errors"]["hovertext"] == [failed]


def test_checkpoints_are_named_after_their_step_and_the_call_they_precede():
    def cp(seq: int, seconds: float, trigger: str, step: int, level: str = "step") -> dict:
        return {
            "id": f"id-{seq}",
            "seq": seq,
            "level": level,
            "trigger": trigger,
            "step_index": step,
            "superseded": False,
            "at": at(seconds).isoformat(),
        }

    def moment(seconds: float, kind: str, tool: str, step: int) -> dict:
        return {**status(seconds, None, None, 0), "type": kind, "tool": tool, "step_index": step}

    events = [
        moment(1.0, "tool_started", "write_file", 4),
        moment(2.0, "review_requested", "delete_file", 4),
    ]
    checkpoints = [
        cp(1, 0.0, "task_start", 0, "task"),
        cp(2, 0.5, "after_model", 4),
        cp(3, 1.01, "before_write_operation", 4, "tool"),
        cp(4, 2.01, "before_review", 4, "tool"),
        cp(5, 3.0, "after_step", 5),
    ]
    figure = charts.task_timeline(
        task=Task(status="succeeded"), events=events, calls=[], checkpoints=checkpoints, now=at(4)
    )
    hover = [
        text
        for trace in figure["data"]
        if trace["meta"]["kind"] == "checkpoints"
        for text in trace["hovertext"]
    ]
    names = sorted(text.split("<br>")[0] for text in hover)
    assert names == [
        "start",
        "step 4 · after model",
        "step 4 · before delete_file",
        "step 4 · before write_file",
        "step 4 · done",
    ]
    assert any("id id-3" in text.split("<br>") for text in hover)


def test_the_review_wait_after_steps_starts_at_the_pause_not_inside_a_cut():
    # Two steps of work, a pause for review at 5 s, the approval an hour later.
    events = [
        status(0, "queued", "running", 1),
        model(1, 2),
        model(3, 3),
        status(5, "running", "waiting_review", 4),
        status(3605, "waiting_review", "queued", 5),
        status(3606, "queued", "running", 6),
        model(3608, 7),
    ]
    figure = charts.task_timeline(
        task=Task(status="succeeded"), events=events, calls=[], checkpoints=[], now=at(3609)
    )
    (band,) = [s for s in figure["layout"]["shapes"] if s["type"] == "rect"]
    assert (band["x0"], band["x1"]) == (
        charts.plotly_time(at(5)),
        charts.plotly_time(at(3605)),
    )
    (cut,) = figure["layout"]["xaxis"]["rangebreaks"]
    lo, hi = cut["bounds"]
    # Plotly draws a shape edge inside a rangebreak at the axis' far left: both edges are
    # outside the cut, so the band starts at the pause, after the steps before it.
    assert band["x0"] < lo and hi < band["x1"]
    assert traces(figure)["waiting for review"]["base"] == [band["x0"]]


def test_tick_labels_are_escaped_and_shortened():
    name = "<b>bold</b><a href='https://evil.example/'>" + "x" * 60
    calls = [call(0, name, 0, [attempt(1, 1, 2, "succeeded")])]
    figure = charts.task_timeline(
        task=Task(status="succeeded"), events=[], calls=calls, checkpoints=[], now=at(3)
    )
    yaxis = figure["layout"]["yaxis"]
    row = charts.plotly_escape(charts.tool_row(name))
    assert row in yaxis["tickvals"] and traces(figure)["tool attempts"]["y"] == [row]
    (label,) = [t for t in yaxis["ticktext"] if t.startswith("tool")]
    assert "<" not in label and label.startswith("tool · &lt;b&gt;bold&lt;/b&gt;&lt;a")
    assert label.endswith("…")


def test_the_text_alternative_lists_the_waits_and_the_calls():
    events = [
        status(0, "queued", "running", 1),
        status(5, "running", "waiting_review", 2),
        status(65, "waiting_review", "queued", 3),
    ]
    calls = [call(0, "write_file", 0, [attempt(1, 1, 1.5, "failed", "boom")])]
    figure = charts.task_timeline(
        task=Task(status="failed"), events=events, calls=calls, checkpoints=[], now=at(70)
    )
    summary = figure["summary"]
    assert summary["headline"] == (
        "1 step, 0 model calls, 1 tool call (1 not succeeded), 0 checkpoints (0 superseded)"
    )
    assert summary["items"] == [
        "waiting for review from 2026-01-01 12:00:05 to 2026-01-01 12:01:05 UTC (1 min 0 s)",
        "write_file #1 (step 0): failed, 1 attempt, 500 ms",
    ]


def test_durations_read_as_words():
    assert charts.duration_text(0.0712) == "71 ms"
    assert charts.duration_text(2.44) == "2.4 s"
    assert charts.duration_text(95) == "1 min 35 s"
