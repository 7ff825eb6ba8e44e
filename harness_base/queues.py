"""The RQ queues ("lanes") of the harness, in the order every worker serves them. Written once,
here, without Django: the settings (`HARNESS_QUEUES`), `./harness up`, the worker entry points,
the tests' worker fixtures and the benchmarks all start workers on `WORKER_QUEUES`.

A worker takes the next job from the first non-empty queue of its list, so a job on `resume`
runs before any job waiting on `high`, `default` or `low`."""

from __future__ import annotations

# Tasks resuming because a person acted on them (an approval, an edit or a rejection, an
# unknown-outcome decision, an operator's retry, resume, rollback or fork): decided work first.
RESUME_QUEUE = "resume"
# A task's own priority names its queue otherwise (TaskSpec.priority, changed by an operator).
PRIORITY_QUEUES = ("high", "default", "low")
WORKER_QUEUES = (RESUME_QUEUE, *PRIORITY_QUEUES)


def redis_text(value: bytes | str | None) -> str:
    """A value read from Redis as text ("" for a missing one): the connections the queues use
    return bytes."""
    if isinstance(value, bytes):
        return value.decode()
    return value or ""
