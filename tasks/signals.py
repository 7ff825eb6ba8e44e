"""Domain events the core defines so that two apps beside each other need not know each other
(issue #32): `checkpoints` (recovery, retention) sends them, `review` receives them
(review/apps.py connects its receivers). Sent inside the sender's transaction, with `send`
(not `send_robust`): a receiver that fails rolls the whole change back, as a direct call did.
`restart_requested` goes the other way: review sends it, checkpoints answers.
A receiver takes the keyword arguments named below and `sender`, `signal`, `**kwargs`."""

from __future__ import annotations

from typing import Any

from django.dispatch import Signal

# A task's later history no longer stands: a recovery forked a new head (rollback, retry,
# forward, adopt) or the task was canceled. task_id=, comment= (why and by whom). Sent with the
# task row locked. review: the task's pending reviews are canceled with that comment.
history_superseded = Signal()

# A rollback undid these ledger rows. tool_call_ids=, cause=, detail=. review: a standing rule
# that allowed one of them pauses itself.
calls_undone = Signal()

# A rollback forked the task onto the branch of a restored state: the reviews people decided
# count on the task only while their call is still on that branch (issue #45). task_id=,
# live_call_ids= (the call_ids the restored state has already settled; its unfinished calls
# run again under fresh call_ids). Sent with the task row locked. review: the task's
# `calls_rejected` / `calls_edited` are recounted over the reviews of those calls.
review_outcomes_recount = Signal()

# Retention asks which of a finished task's checkpoints must stay whatever the keep rule says.
# task_id=; each receiver returns an iterable of checkpoint ids. review: those an open review
# refers to.
checkpoints_needed = Signal()

# A `version_drift` review was decided `restart` (issue #43): go back to an earlier checkpoint
# and resume from it. task_id=, checkpoint_id=, user=, reason=; sent with the task row locked
# and the review closed, inside the decision's transaction. checkpoints: a rollback to that
# checkpoint, resumed; each receiver returns None, or (field, message) when it refuses (field
# empty: a conflict), and the decision is then refused as a whole.
restart_requested = Signal()


def checkpoints_needed_ids(*, task_id: object) -> set[object]:
    """The union of what every receiver of `checkpoints_needed` answers for the task."""
    needed: set[object] = set()
    for _receiver, ids in checkpoints_needed.send(sender=None, task_id=task_id):
        needed.update(ids or ())
    return needed


# Would the review policy pause a compensating call? task=, call= (the original ledger row),
# tool= (the compensating ToolSpec, None when this process cannot describe it), arguments=.
# review: whether its policy reviews it (review.compensation).
compensation_review = Signal()


def compensation_pauses(*, task: Any, call: Any, tool: Any, arguments: dict[str, Any]) -> bool:
    """Whether the compensating call will pause for review. With no receiver answering (the
    review app not installed) it pauses: a preview never promises less review than the
    rollback gets."""
    answers = [
        answer
        for _receiver, answer in compensation_review.send(
            sender=None, task=task, call=call, tool=tool, arguments=arguments
        )
    ]
    return not answers or any(bool(answer) for answer in answers)
