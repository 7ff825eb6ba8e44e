"""A non-idempotent call that times out and ignores its stop may still take effect: the harness
must neither report it failed (the model would simply try again) nor succeeded."""

from __future__ import annotations

import threading

import pytest
from pydantic import BaseModel

from agent.runtime import task_run
from review.models import ReviewRequest
from tasks.models import ToolCall
from tasks.tools import ToolContext, tool
from tests.factories import queued_task

pytestmark = pytest.mark.django_db(transaction=True)

released = threading.Event()


class ChargeArgs(BaseModel):
    amount: int


@tool(risk="write", side_effect=True, idempotent=False, timeout_s=30)
def stubborn_charge(ctx: ToolContext, args: ChargeArgs) -> dict:
    """A charge that ignores ctx.stop (as a blocking client library would)."""
    released.wait(10)
    return {"charged": args.amount}


@pytest.fixture(autouse=True)
def _release_the_charge(harness_dirs):
    yield
    released.set()


def test_a_timed_out_call_that_will_not_stop_goes_to_review_as_unknown_outcome():
    task = queued_task(
        [{"call": "stubborn_charge", "args": {"amount": 40}}, {"final": "charged"}],
        ["stubborn_charge"],
        budget={"tool_timeout_s": 0.2},
    )

    assert task_run(task_id=task.id) == "paused"

    task.refresh_from_db()
    assert task.status == "waiting_review"
    call = ToolCall.objects.get(task=task)
    assert call.status == "unknown_outcome" and "did not stop" in call.error_message
    review = ReviewRequest.objects.get(task=task)
    assert review.kind == "unknown_outcome" and review.status == "pending"
