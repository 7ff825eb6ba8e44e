"""Workspace snapshots: incremental capture and rollback.

Capture: a workspace of 10,000 text files (~1 KB each, in 100 folders) is captured once (cold:
every file read, hashed and uploaded), then each measured run changes one file and times
`checkpoints.snapshots.snapshot_capture` — the real function the loop calls for every
checkpoint: it stats every file, reads only the changed one, re-stores one manifest chunk and
the root, and asks the blob store (the database) about new blobs in one query.

Watched capture: the same captures alternate with ones made as an SDK agent's step makes them
(agent.sdk_run.workspace): `snapshot_capture(changed=watch.changed())`, the workspace watched
by inotify (checkpoints.snapshots.watch), so only the changed file is looked at, not every
folder; the time includes reading the watch's events.

Rollback: a task whose workspace has 1,000 files is checkpointed (A), then all 1,000 files are
changed and checkpointed again (B, the head). Each measured run times the real service
`checkpoints.recovery.checkpoint_rollback` back to A (hold): lock, verify, compute the preview
data, restore the 1,000 files from the blob store (two batched reads), write the rollback
checkpoint, supersede, audit. Between runs the files are changed again (untimed).

Targets (issue 4): capture <= 50 ms; rollback of 1,000 changed files <= 1 s.

Expected run time (quiet 2-CPU machine): smoke ~5 s; full ~1.5 min (a 10,000-file workspace,
50 incremental captures, repeated rollbacks of 1,000 changed files).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import figure, profile_top, scripted_task, stats, tasks_delete

TITLE = "Workspace snapshots"
SIZES = {
    "smoke": {"files": 200, "changed": 20, "n": 3},
    "full": {"files": 10_000, "changed": 1_000, "n": 50},
}
CAPTURE_TARGET_MS = 50
ROLLBACK_TARGET_MS = 1000


def _fill(root: Path, files: int, *, folders: int = 100) -> list[Path]:
    paths = []
    for i in range(files):
        folder = root / f"pkg{i % folders:03}"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"module_{i:05}.py"
        path.write_text(f"# module {i}\n" + f"value = {i}  # padding text\n" * 36)
        paths.append(path)
    _age(paths)
    return paths


def _age(paths: list[Path]) -> None:
    """Back-date files so they are outside the racy window, as files written a while ago."""
    past = time.time_ns() - 60 * 10**9
    for path in paths:
        os.utime(path, ns=(past, past))


def _capture(
    files: int, n: int
) -> tuple[dict[str, Any], dict[str, Any], list[dict], dict[str, Any]]:
    """(surveyed capture ms, watched capture ms, profile, details)."""
    from checkpoints.snapshots import snapshot_capture
    from checkpoints.snapshots.watch import WorkspaceWatch

    root = Path(tempfile.mkdtemp(prefix="bench-capture-"))
    watch = WorkspaceWatch(root)
    try:
        paths = _fill(root, files)
        started = time.perf_counter()
        first = snapshot_capture(workspace=root)
        cold_s = time.perf_counter() - started
        snapshot_capture(workspace=root, changed=watch.changed())  # warm the index, watch
        samples: list[float] = []
        watched: list[float] = []
        for i in range(2 * n):  # alternately surveyed and watched
            target = paths[(i * 7919) % len(paths)]
            target.write_text(target.read_text() + f"# edit {i}\n")
            started = time.perf_counter()
            if i % 2:
                snapshot_capture(workspace=root, changed=watch.changed())
                watched.append(time.perf_counter() - started)
            else:
                snapshot_capture(workspace=root)
                samples.append(time.perf_counter() - started)

        def one_more() -> None:
            paths[0].write_text(paths[0].read_text() + "# profiled\n")
            snapshot_capture(workspace=root)

        profile = profile_top(one_more, repeat=3)
        return (
            stats(samples, scale=1000),
            stats(watched, scale=1000),
            profile,
            {"files": first["files"], "bytes": first["bytes"], "cold_capture_ms": cold_s * 1000},
        )
    finally:
        watch.close()
        shutil.rmtree(root, ignore_errors=True)


def _rollback(changed: int, n: int) -> tuple[dict[str, Any], list[dict], dict[str, Any]]:
    from django.conf import settings

    from checkpoints.models import Checkpoint
    from checkpoints.recovery import checkpoint_rollback
    from checkpoints.services import checkpoint_build, checkpoint_next_seq
    from checkpoints.snapshots import snapshot_capture
    from tasks.agent_state import AgentState
    from tasks.models import Task
    from tasks.services import task_transition

    old_root = settings.HARNESS_WORKSPACE_ROOT
    settings.HARNESS_WORKSPACE_ROOT = Path(tempfile.mkdtemp(prefix="bench-rollback-"))
    task = scripted_task(script=[{"final": "x"}], tools=[], title="bench snapshots")
    try:
        workspace = task.workspace_path
        paths = _fill(workspace, changed, folders=20)

        def checkpoint(trigger: str) -> Checkpoint:
            cp = checkpoint_build(
                task_id=task.id,
                seq=checkpoint_next_seq(task_id=task.id),
                state=AgentState(),
                level="step",
                trigger=trigger,
                snapshot=snapshot_capture(workspace=workspace),
            )
            cp.save(force_insert=True)
            Task.objects.filter(id=task.id).update(head_checkpoint=cp)
            return cp

        base = checkpoint("after_step")
        task_transition(task_id=task.id, to="failed", reason="bench")

        def change_all(round_: int) -> None:
            for path in paths:
                path.write_text(path.read_text() + f"# round {round_}\n")
            checkpoint("after_step")

        samples = []
        for i in range(n):
            change_all(i)
            started = time.perf_counter()
            result = checkpoint_rollback(
                task_id=task.id, checkpoint_id=base.id, user=None, reason="bench", resume=False
            )
            samples.append(time.perf_counter() - started)
            assert len(result.restored.written) == changed, result.restored

        def one_more() -> None:
            change_all(n)
            checkpoint_rollback(
                task_id=task.id, checkpoint_id=base.id, user=None, reason="bench", resume=False
            )

        profile = profile_top(one_more)
        return stats(samples, scale=1000), profile, {"files_restored": changed}
    finally:
        tasks_delete([task.id])
        shutil.rmtree(settings.HARNESS_WORKSPACE_ROOT, ignore_errors=True)
        settings.HARNESS_WORKSPACE_ROOT = old_root


def run(size: str) -> dict[str, Any]:
    params = SIZES[size]
    capture, watched, capture_profile, capture_details = _capture(params["files"], params["n"])
    rollback, rollback_profile, rollback_details = _rollback(
        params["changed"], max(3, params["n"] // 5)
    )
    return {
        "title": TITLE,
        "figures": [
            figure(
                figure=f"Incremental capture, {params['files']:,} files, one changed",
                unit="ms",
                ours=capture,
                target=f"<= {CAPTURE_TARGET_MS} ms",
                met=capture["median"] <= CAPTURE_TARGET_MS,
            ),
            figure(
                figure=f"Capture after an SDK agent's tool, {params['files']:,} files, one "
                "changed, the workspace watched",
                unit="ms",
                ours=watched,
                reference=capture,
                reference_label="the same capture surveying every folder (alternated)",
                target="(info) what an SDK step's snapshot costs",
            ),
            figure(
                figure=f"Rollback restoring {params['changed']:,} changed files",
                unit="ms",
                ours=rollback,
                target=f"<= {ROLLBACK_TARGET_MS} ms",
                met=rollback["median"] <= ROLLBACK_TARGET_MS,
            ),
        ],
        "profiles": {"capture": capture_profile, "rollback": rollback_profile},
        "notes": (
            "Capture: `snapshot_capture` on a 10,000-file workspace after one file changed "
            "(stat every file, read the changed one, upload new blobs after one batched "
            "existence query); alternated with the capture an SDK agent's step makes, its "
            "workspace watched by inotify (only the changed file looked at). Rollback: "
            "`checkpoint_rollback` (hold) of a task whose 1,000 files all changed since the "
            "target checkpoint, database blob store."
        ),
        "details": {**capture_details, **rollback_details},
    }
