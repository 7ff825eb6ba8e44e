"""A call's `tool_started` event names the arguments it runs with only when they are not the
ones the model proposed (its `model_decision` event and the ledger row hold those): a
reviewer's edit shows there, a write's content is not stored once more for every call."""

from __future__ import annotations

import pytest

from tasks.models import Task
from tests.conftest import approve
from tests.factories import run_in_process

pytestmark = pytest.mark.django_db(transaction=True)


def test_tool_started_names_edited_arguments_only(paused_review, operator):
    review = paused_review(
        script=[
            {"call": "write_file", "args": {"path": "app.conf", "content": "debug=true\n"}},
            {"call": "write_file", "args": {"path": "notes.txt", "content": "as proposed\n"}},
            {"final": "configured"},
        ],
        tools=["write_file"],
        files={"app.conf": "debug=false\n"},
    )
    edited = {"path": "app.conf", "content": "debug=false\n"}
    approve(review, operator, arguments=edited)
    task = Task.objects.get(pk=review.task_id)
    assert run_in_process(task) == "succeeded"

    started = [e.payload for e in task.events.filter(type="tool_started").order_by("id")]
    assert len(started) == 2
    assert started[0]["args"] == edited
    assert "args" not in started[1]
    decided = [e.payload for e in task.events.filter(type="model_decision").order_by("id")]
    assert decided[1]["calls"][0]["args"] == {"path": "notes.txt", "content": "as proposed\n"}
