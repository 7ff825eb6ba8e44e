"""The RQ worker class for harness jobs (`settings.RQ["WORKER_CLASS"]`).

RQ runs each job in a forked work horse and waits for it in the worker process. That process
is a separate interpreter, so the harness uses it for what must not depend on the horse being
responsive: while a horse runs a task, a supervisor thread here heartbeats the task (a horse
stuck inside one call is seen as busy, not dead, and is not redispatched to a second worker)
and kills a horse that does not act on a cancel; a horse that was killed (cancel, or the job's
hard timeout) has its task settled here.

The horse is forked before its job arrives (Standby): while the worker waits on Redis, the next
horse already exists, in its own process group, connected to PostgreSQL and Redis, blocked on a
pipe. A dequeued job is handed to it over the pipe instead of paying the fork and two fresh
connections while an operator waits for an approved call to run (bench/approval/). From the
handoff on it is RQ's work horse like any other: the worker waits for it, heartbeats and
supervises it, kills it and settles its task exactly as for a horse forked for the job.

Its Redis commands retry through a lost connection for HARNESS_REDIS_RETRY_S (redis_retry):
RQ alone ends a worker on the first connection error outside its wait for a job.

No work outlives its worker: every horse (standby or forked for its job) has the kernel kill it
when the worker dies (standby.die_with_parent), and its sandbox dies with it (bubblewrap's
--die-with-parent). SIGTERM drains (HARNESS_DRAIN_S): no new job, and a horse running a task
is asked (agent.runtime.drain) to give it back at its next step boundary; one still running
when the drain runs out is killed and its task redispatched at once.

The modules, from the bottom: `redis_retry` (patient_retry), `standby` (die_with_parent,
standby_wait, Standby, and StandbyHorses, Worker's part that forks the next horse and hands it
its job), `worker` (cancel_kill_grace_s, Supervision, and Worker itself). RQ names the class
by this package's path, `agent.worker.Worker`.
"""

from __future__ import annotations

from agent.worker.standby import Standby
from agent.worker.worker import Supervision, Worker

__all__ = ["Standby", "Supervision", "Worker"]
