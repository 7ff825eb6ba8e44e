"""The retry policy and the failure classes, as pure functions."""

from __future__ import annotations

import random

import pytest

from agent.retry import RetryPolicy, classify_exception, is_retryable, retry_policy
from harness_base.config import HarnessConfig
from tasks.spec import RetrySpec
from tasks.tools.registry import registry

CONFIG = HarnessConfig.model_validate(
    {
        "retry": {"initial_s": 1, "factor": 2, "max_s": 60, "jitter": "none", "max_attempts": 5},
        "checkpoint_triggers": [{"event": "on_retryable_error", "level": "step"}],
    }
)


def test_waits_double_from_the_initial_wait_up_to_the_maximum():
    policy = retry_policy(config=CONFIG, task_override=RetrySpec(max_s=10))
    assert [policy.delay_s(n) for n in range(1, 7)] == [1, 2, 4, 8, 10, 10]


@pytest.mark.parametrize(("jitter", "low", "high"), [("full", 1.0, 2.0), ("equal", 1.0, 1.5)])
def test_jitter_adds_up_to_the_base_wait_so_waits_still_grow(jitter, low, high):
    policy = RetryPolicy(initial_s=4, factor=2, max_s=100, jitter=jitter, max_attempts=9)
    rng = random.Random(7)
    for _ in range(200):
        first, second = policy.delay_s(1, rng=rng), policy.delay_s(2, rng=rng)
        assert 4 * low <= first < 4 * high
        assert 8 * low <= second < 8 * high
        assert second >= first


def test_a_servers_retry_after_is_a_lower_bound():
    policy = retry_policy(config=CONFIG)
    assert policy.delay_s(1, retry_after_s=30) == 30
    assert policy.delay_s(4, retry_after_s=3) == 8


def test_tool_overrides_global_and_task_overrides_tool_field_by_field():
    policy = retry_policy(
        config=CONFIG,
        tool_override=RetrySpec(initial_s=0.5, max_attempts=2),
        task_override=RetrySpec(max_attempts=4),
    )
    assert (policy.initial_s, policy.max_attempts, policy.max_s) == (0.5, 4, 60)


def test_the_retryable_error_trigger_caps_attempts_of_every_policy():
    config = HarnessConfig.model_validate(
        {
            "retry": {"max_attempts": 5},
            "checkpoint_triggers": [
                {"event": "on_retryable_error", "level": "step", "max_retries": 2}
            ],
        }
    )
    assert retry_policy(config=config, task_override=RetrySpec(max_attempts=9)).max_attempts == 3


def test_the_tool_decorator_takes_retry_overrides(settings):
    settings.HARNESS_TOOL_MODULES = ["examples.ticket_tools"]
    tool = registry.get("open_ticket")
    assert tool.retry == RetrySpec(max_attempts=4, initial_s=2)
    policy = retry_policy(config=CONFIG, tool_override=tool.retry)
    assert (policy.max_attempts, policy.delay_s(2)) == (4, 4)


def test_failures_are_classified():
    assert classify_exception(TimeoutError()) == "timeout"
    assert classify_exception(ConnectionResetError()) == "transient"
    assert classify_exception(ValueError("bad")) == "tool_crashed"
    assert is_retryable("transient", idempotent=False)
    assert is_retryable("timeout", idempotent=True)
    # A timed-out call was stopped mid-way: only an idempotent one may run again.
    assert not is_retryable("timeout", idempotent=False)
    assert not is_retryable("permanent", idempotent=True)
    assert not is_retryable("tool_crashed", idempotent=True)
