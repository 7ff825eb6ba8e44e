"""Run's durable writes (RunWrites, part of Run: agent.runtime.run): checkpoints staged and one
commit of everything staged, fenced by the lease epoch."""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import nullcontext
from typing import Any

from django.db import transaction

from agent.runtime.run_books import RunBookkeeping
from agent.versions import version_bodies_unwritten, version_bodies_written, versions_current
from checkpoints.blobstore import blob_store_deferred
from checkpoints.models import Checkpoint
from checkpoints.services import checkpoint_build, checkpoint_dedupe
from checkpoints.snapshots import DEFER_BLOB_BYTES, snapshot_capture, snapshot_distrust
from harness_base.metrics import CHECKPOINT_WRITE_SECONDS, metric_observe
from tasks import services
from tasks.models import ToolCall
from tasks.paths import call_paths
from tasks.tracing import checkpoints_traced

# A ledger row's fields a call's progress changes (every runner's fenced writes update these).
LEDGER_FIELDS = [
    "arguments",
    "arguments_hash",
    "status",
    "result",
    "error_class",
    "error_message",
    "attempts",
    "attempt_log",
    "plan_mark",
    "plan_item",
    "started_at",
    "finished_at",
    "duration_ms",
]


class RunWrites(RunBookkeeping):
    """Run's checkpoints staged and committed."""

    def capture_snapshot(self) -> dict | None:
        """The workspace manifest stored with a checkpoint (see checkpoints.snapshots). Only
        tool calls change the workspace during a run, so a checkpoint with no call since the
        last capture (after a model turn) reuses that manifest instead of rescanning; after
        calls of tools that report their changes, only the changed files' folders are
        scanned; after any other tool (commands, user tools), the whole workspace. A few
        changed files are listed in the manifest reference itself (`delta`) rather than
        stored as a new manifest."""
        if self.snapshot is None or self.changed:
            self.snapshot = snapshot_capture(
                workspace=self.workspace,
                changed=self.changed if self.snapshot is not None else None,
                defer=self.blobs,
                delta=True,
            )
            self.changed = set()
        return self.snapshot

    def stage(
        self, *, trigger: str | None, level: str | None = None, subject: str = ""
    ) -> Checkpoint | None:
        """Build the checkpoint of `trigger` now (the state as it is) and keep it for the next
        durable write, which inserts it (and makes it the head) with whatever else that write
        carries. `trigger` None, or a trigger switched off in harness.yaml, builds none; a
        `level` builds one at that level whatever harness.yaml says."""
        if not trigger:
            return None
        configured = self.config.trigger(trigger)
        if not level:
            if configured is None:
                return None
            level = configured.level
        checkpoint = checkpoint_build(
            task_id=self.task_id,
            seq=self.seq,
            state=self.state,
            level=level,
            trigger=trigger,
            snapshot=self.capture_snapshot(),
            parent_id=self.head_id,
            codec=self.codec,
            versions=versions_current(self),
        )
        checkpoint.subject = subject
        if trigger in _BEFORE_CALL:
            # Nothing changed since the checkpoint staged last (the model's turn, in the same
            # write): stored as that one's payload, not again.
            checkpoint_dedupe(checkpoint, self.staged)
        bases = self.codec.take_bases()
        if bases:
            blob_store_deferred(self.blobs, DEFER_BLOB_BYTES).put_absent(bases)
        self.staged.append(checkpoint)
        self.seq += 1
        self.head_id = checkpoint.id
        return checkpoint

    def commit(
        self,
        *,
        trigger: str | None,
        extra: list[Any] | None = None,
        fields: dict[str, Any] | None = None,
        then: Callable[[Any], object] | None = None,
        level: str | None = None,
    ) -> None:
        """One durable write: what was staged since the last one (checkpoints with the new
        blobs of their snapshots, events, the outcomes of calls) + [the checkpoint of
        `trigger`, see `stage`] + task row (fenced) + extra rows, in one transaction;
        `then(the checkpoint of trigger or None)` runs last inside it."""
        checkpoint = self.stage(trigger=trigger, level=level, subject=_subject(trigger, extra))
        update = {**self.usage_fields(), **(fields or {})}
        if self.head_id != self.written_head:
            update["head_checkpoint_id"] = self.head_id
        # Outcomes of read-only calls ride along with the next write (see
        # agent.runtime.call_execute).
        extra = [
            *self.deferred_rows,
            *(row for row in extra or () if row not in self.deferred_rows),
        ]
        started = time.monotonic()
        try:
            # A pause adds `then` (a transition, a review) to the same write: one transaction.
            with transaction.atomic() if then is not None else nullcontext():
                self.cancel_seen = services.task_fenced_write(
                    task_id=self.task_id,
                    epoch=self.epoch,
                    inserts_if_absent=[*self.blobs.values(), *version_bodies_unwritten(self)],
                    inserts=[
                        *self.staged,
                        *(row for row in extra if row._state.adding),
                        *self.pending_events,
                        *self.pending_outputs,
                    ],
                    updates=[(row, LEDGER_FIELDS) for row in extra if not row._state.adding],
                    **update,
                )
                if then is not None:
                    then(checkpoint)
        except BaseException:
            if self.blobs:
                snapshot_distrust(self.workspace)
            # The bases of the staged checkpoints may not be stored: the next one starts anew.
            self.codec.forget()
            raise
        version_bodies_written(self)
        checkpoints_traced(self.staged)
        metric_observe(CHECKPOINT_WRITE_SECONDS, time.monotonic() - started)
        self.blobs = {}
        self.deferred_rows = []
        self.pending_events = []
        self.pending_outputs = []
        self.staged = []
        self.written_head = self.head_id
        self.turn_unwritten = self.effect_unwritten = False


# The triggers of a checkpoint taken before one call (the call rides along in the write).
_BEFORE_CALL = frozenset(
    {"before_tool", "before_write_operation", "before_external_call", "before_review"}
)


def _subject(trigger: str | None, extra: list[Any] | None) -> str:
    """The call a checkpoint of `trigger` precedes, as it reads: its tool and the path,
    command or URL it acts on ("write_file etc/nginx.conf"); "" for other checkpoints."""
    if trigger not in _BEFORE_CALL:
        return ""
    call = next((row for row in extra or () if isinstance(row, ToolCall)), None)
    if call is None:
        return ""
    args = call.arguments if isinstance(call.arguments, dict) else {}
    target = next(iter(call_paths(args)), None) or args.get("command") or args.get("url")
    text = f"{call.tool} {target}" if isinstance(target, str) and target else call.tool
    text = " ".join(text.split())  # a command's lines on one line
    return text if len(text) <= 200 else text[:199] + "…"
