"""agent.sdk_run.inline: the SDK runners' bookkeeping called from their event loop, in the job's
thread, on the job's own database connection; Django's guard against synchronous database
access from a running loop still holds everywhere else."""

from __future__ import annotations

import asyncio
import threading

import pytest
from django.core.exceptions import SynchronousOnlyOperation

from agent.sdk_run.inline import inline
from tasks.models import Task
from tests.factories import TaskFactory

pytestmark = pytest.mark.django_db


def test_an_inline_write_is_the_jobs_own_connection_in_the_jobs_thread():
    # Written by the job's connection and not committed: only that connection sees it.
    task = TaskFactory(title="uncommitted")
    job_thread = threading.get_ident()

    async def run():
        await asyncio.sleep(0)
        seen = inline(lambda: Task.objects.filter(id=task.id).values_list("title", flat=True)[0])
        inline(Task.objects.filter(id=task.id).update, title="renamed")
        return seen, inline(threading.get_ident), asyncio.get_running_loop() is not None

    seen, thread, loop_back = asyncio.run(run())
    assert (seen, thread, loop_back) == ("uncommitted", job_thread, True)
    task.refresh_from_db()
    assert task.title == "renamed"


def test_the_guard_holds_outside_an_inline_call_and_after_one_that_raised():
    task = TaskFactory()

    def boom():
        raise ValueError("the hook failed")

    async def run():
        with pytest.raises(ValueError, match="the hook failed"):
            inline(boom)
        # The loop is shown again: Django refuses a direct synchronous query from it.
        with pytest.raises(SynchronousOnlyOperation):
            Task.objects.filter(id=task.id).exists()
        return asyncio.get_running_loop()

    assert asyncio.run(run()) is not None
