"""Replays are left out of the failure statistics (issue #31): their calls are answered from a
recording, so their outcomes are not the tools'."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from tasks.models import ToolCall
from tasks.rollups import finished_tasks, settled_calls
from tests.factories import TaskFactory, ToolCallFactory

pytestmark = pytest.mark.django_db


def test_a_replay_s_failed_calls_and_its_failure_are_not_counted():
    now = timezone.now()
    real = TaskFactory(status="failed", finished_at=now)
    replay = TaskFactory(status="failed", finished_at=now, is_replay=True)
    ToolCallFactory(task=real, status="failed", error_class="permanent")
    ToolCallFactory(task=replay, status="failed", error_class="permanent")
    counted = settled_calls(ToolCall.objects.all())
    assert list(counted.values_list("task_id", flat=True)) == [real.id]
    window = ((now - timedelta(hours=1), now + timedelta(hours=1)),)
    assert list(finished_tasks(window)) == [real]
