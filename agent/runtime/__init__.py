"""The agent loop, run inside an RQ job (`agent.jobs.run_task` -> `task_run`), as units that
can be read, tested and timed on their own:

    loop.task_run      acquire the lease (lease.with_lease) -> Run -> run_execute:
    start              start (task_start checkpoint) or resume the head checkpoint (verified):
                       workspace restored, context aligned, MCP tools listed
    loop               boundary checks (lease, global round, cancel, session timeout, budgets)
    turn.model_turn    one model turn -> checkpoint `after_model` (staged: see below)
    calls.call_next    one tool call: ledger row (call_id = idempotency key), replay
                       (call_again), checks, policy gate (call_gate; review_gate ->
                       review.services), checkpoint before side effects, the attempt
                       (call_execute; attempt.invoke: timeout), retry or settle
    step.step_finish   close the step -> checkpoint `after_step`
    finish             succeeded / failed / canceled
    run.Run            the per-run state, with its parts run_books.RunBookkeeping (events,
                       clocks, usage, tools), run_writes.RunWrites and run_pauses.RunPauses
                       (the writes every unit shares: stage, commit; pause, schedule_retry);
                       ends: StopRun, Paused; lease: the job's lease and a lost database
                       connection; watchdog: the heartbeat and InThread; ledger; delegation
                       and group: multi-agent waits and global checkpoint rounds

Durable writes are few and fused (issue 17): a unit stages what it has to write (events,
checkpoints with their new blobs, the outcomes of calls: `Run.stage`) and the next
`Run.commit` writes all of it in one transaction. A read-only step writes once, when its model
turn is done and before its first tool runs (so a crash in a call never asks the model again);
its calls' outcomes and its end ride with the next write. A side-effecting step writes twice:
the intent before the effect (model turn, ledger row, the checkpoint before it), and the
outcome with `after_step`. The final answer's step and the end of the run are one write; a
resumed run writes with its step's first write. tests/durable/test_write_count.py counts them.

Every write is fenced by the lease epoch (`tasks.services.task_fenced_write`): a worker presumed
dead and replaced fails its next write and stops before running another side effect. A review,
a retry wait, success, failure or cancel ends the job; no worker waits for a human.
"""

from agent.runtime.loop import task_run

__all__ = ["task_run"]
