"""The sweep (`manage.py harness_sweep`): the database is the source of truth, so whatever a
crash or a Redis restart left behind is repaired from it.

1. A running task whose heartbeat is older than HARNESS_STALE_AFTER_S (database clock) lost its
   worker: it becomes `stalled`, then is redispatched (queued, forward recovery from its newest
   valid checkpoint) at most HARNESS_MAX_REDISPATCHES times, then fails (`stalled`). A cancel
   requested before the worker died is honoured instead.
2. A queued task (or one whose retry backoff is past) whose RQ job is gone — Redis restarted or
   was flushed, or the job died before it acquired the task — is enqueued again.
3. Overdue reviews expire (`review.services.reviews_expire_overdue`); notifications that came
   due (reminders, escalations, retries) or whose job was lost are handed to RQ
   (`review.notifications.notifications_enqueue_due`).
4. Finished hours of tool calls are rolled up for the statistics (`tasks.rollups`).
5. Every `retention.every` (harness.yaml), retention thins the checkpoints of the tasks that
   finished since its last run, and every `retention.gc_every` it collects unreferenced blobs
   (the job named by settings.HARNESS_RETENTION_JOB, `checkpoints.retention.retention_run`).
6. Multi-agent groups: a parent waiting for children that have all ended is woken (a child
   canceled on its own, or whose end was not reported); open global checkpoint rounds are
   advanced (committed when complete, aborted past their deadline); a group rollback's restore
   of the shared directory that a crash or an I/O error interrupted is finished.

Every step is safe to run concurrently from several sweepers and to repeat: transitions are
row-locked and conditional, and a duplicate job finds its task taken and exits.

The modules, from the bottom: `counts` (SweepCounts, sweep_record), `stalled` (1:
task_recover_stalled, tasks_recover_stalled), `orphaned` (2: tasks_requeue_orphaned),
`retention` (5: sweep_retention), `once` (sweep_once, the pass: steps 3, 4 and 6 are
other apps' services).
"""

from __future__ import annotations

from agent.sweep.counts import SweepCounts
from agent.sweep.once import sweep_once
from agent.sweep.retention import sweep_retention
from agent.sweep.stalled import task_recover_stalled

__all__ = ["SweepCounts", "sweep_once", "sweep_retention", "task_recover_stalled"]
