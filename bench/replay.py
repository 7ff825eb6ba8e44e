"""Replaying a saved case with its recorded decisions, against the run it was saved from.

The original: a task of N steps (200 at full size) run in this process through the real loop
(`agent.runtime.task_run`, as a worker runs it), each step a `run_command` (`echo i`: the real
sandbox, bubblewrap and cgroup, per call) decided by a scripted model that takes 50 ms per
turn — a stand-in far faster than any hosted model, so the ratio is conservative. The task is
saved as a case (`cases.services.case_save`) and replayed with its recorded decisions
(`case_replay_start`, then `task_run`): every call matches a recorded one and is answered from
the recording, every decision comes from the case's copy; checkpoints, events and the ledger
are written as in any run. Each replay must pass its case (`case_run_report`).

Target (issue 31): the replay at least 5x faster than the original (ratio <= 0.2).

Expected run time (quiet 2-CPU machine): smoke ~5 s; full ~1 min (3 pairs of 200 steps).
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from bench.common import figure, scripted_task, stats, tasks_delete

TITLE = "Replay of a saved case"
SIZES = {"smoke": {"steps": 10, "n": 1}, "full": {"steps": 200, "n": 3}}
MODEL_DELAY_S = 0.05
TARGET_RATIO = 0.2


def _pair(steps: int) -> tuple[float, float]:
    from agent.runtime import task_run
    from cases.selectors import case_run_report
    from cases.services import case_replay_start, case_save
    from tasks.services import task_transition

    script = [
        {"call": "run_command", "args": {"command": f"echo {i}"}, "delay_s": MODEL_DELAY_S}
        for i in range(steps)
    ] + [{"final": "done"}]
    task = scripted_task(script=script, tools=["run_command"], title="bench replay original")
    ids = [task.id]
    case = None
    try:
        started = time.perf_counter()
        outcome = task_run(task_id=task.id)
        original = time.perf_counter() - started
        task.refresh_from_db()
        assert outcome == "succeeded", (task.error_class, task.error_message)
        case = case_save(task=task, user=None, name=f"bench-replay-{uuid.uuid4().hex[:8]}")
        run = case_replay_start(case=case, user=None, enqueue=False)
        ids.append(run.task_id)
        task_transition(task_id=run.task_id, to="queued", reason="bench")
        started = time.perf_counter()
        task_run(task_id=run.task_id)
        replay = time.perf_counter() - started
        run.task.refresh_from_db()
        report = case_run_report(case_run=run)
        assert report["passed"], report["failures"]
    finally:
        if case is not None:
            case.delete()
        tasks_delete(ids)
    return original, replay


def run(size: str) -> dict[str, Any]:
    from review.models import ReviewRule

    steps, n = SIZES[size]["steps"], SIZES[size]["n"]
    # Commands run unreviewed for the benchmark (the shipped policy reviews every command).
    rule = ReviewRule.objects.create(
        name=f"bench-replay-{uuid.uuid4().hex[:8]}", tool="run_command", action="allow"
    )
    originals, replays = [], []
    try:
        for _ in range(n):
            original, replay = _pair(steps)
            originals.append(original)
            replays.append(replay)
    finally:
        rule.delete()
    ours, reference = stats(replays), stats(originals)
    ratio = ours["median"] / reference["median"]
    return {
        "title": TITLE,
        "figures": [
            figure(
                figure=f"{steps}-step case replayed with its recorded decisions",
                unit="s",
                ours=ours,
                reference=reference,
                reference_label="the original run",
                target=f"ratio <= {TARGET_RATIO} (at least 5x faster)",
                met=ratio <= TARGET_RATIO,
                note=(
                    f"{reference['median'] / steps * 1000:.1f} ms/step original, "
                    f"{ours['median'] / steps * 1000:.1f} ms/step replay"
                ),
            )
        ],
        "notes": (
            f"The original: {steps} steps, each a sandboxed `run_command` (`echo i`) decided by a "
            f"scripted model taking {MODEL_DELAY_S * 1000:.0f} ms per turn, run in-process by "
            "the real loop. The replay: the same task saved as a case and replayed with its "
            "recorded decisions (every call answered from the recording, nothing run), by the "
            "same loop; each replay passes its case. Wall time of `task_run`, both."
        ),
        "details": {"steps": steps, "n": n, "model_delay_s": MODEL_DELAY_S, "ratio": ratio},
    }
