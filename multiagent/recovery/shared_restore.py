"""The group's shared directory restored to a rollback's cut after the rollback's commit
(`shared_restore_finish`), by the rollback itself, a participant's run before its first step,
or the sweep (`shared_restores_finish_pending`), whichever comes first."""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction

from checkpoints.snapshots import snapshot_restore
from multiagent.models import SharedRestorePending
from multiagent.shared import shared_path

logger = logging.getLogger(__name__)


def shared_restore_finish(*, root_id: Any) -> bool:
    """Restore the group's shared directory to the cut of the group rollback that left it
    pending, then drop the pending record, under that record's row lock: two finishers never
    restore at once, and a participant's run, which calls this before its first step, never
    writes the directory before it is back. -> whether a restore was pending. What the restore
    raises propagates, and the record stays for the next try."""
    with transaction.atomic():
        pending = (
            SharedRestorePending.objects.select_for_update()
            .select_related("global_checkpoint")
            .filter(root_id=root_id)
            .first()
        )
        if pending is None:
            return False
        snapshot_restore(
            workspace=shared_path(root_id=root_id),
            snapshot=pending.global_checkpoint.shared_snapshot,
        )
        pending.delete()
    return True


def shared_restores_finish_pending() -> int:
    """The sweep's step: finish every pending shared-directory restore; -> how many it did. One
    that fails is logged and left for the next sweep."""
    done = 0
    for root_id in list(SharedRestorePending.objects.values_list("root_id", flat=True)):
        try:
            done += shared_restore_finish(root_id=root_id)
        except Exception:
            logger.exception(
                "restoring the shared directory of group %s failed; the next sweep tries again",
                root_id,
            )
    return done
