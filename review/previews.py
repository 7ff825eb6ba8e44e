"""What a call would do with arguments an operator edited: the same preview function the
pause used (tasks.fingerprint.previewed), run in the web process against the call's targets
as they are now. An edited approval stores it (`ReviewRequest.edited_preview`), so every page
and message that offers a decision shows the effect of exactly the arguments it binds."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from review.models import ReviewRequest
from review.recheck import review_targets_now, review_tool_context
from tasks.fingerprint import LOCAL_KINDS, fingerprint_of, previewed
from tasks.selectors import task_tool


def review_preview(
    *, review: ReviewRequest, arguments: dict[str, Any] | None = None
) -> tuple[str, dict[str, Any]]:
    """(the preview, the fingerprint it was computed against) of the review's call with
    `arguments` (default: the ones an approval would run; they must already satisfy the
    tool's schema, review.services.edits.edit_validate). The fingerprint holds the local
    targets as they are now, read before and after the preview, with the recorded remote ones
    (a remote target an edit changed is not in them: the worker's recheck then reopens the
    call rather than run it unseen)."""
    arguments = review.arguments if arguments is None else arguments
    tool, ctx, args, _local = review_targets_now(review=review, arguments=arguments)
    if tool is None:
        return json.dumps(arguments, indent=2, ensure_ascii=False), review.target_fingerprint
    text, fingerprint = previewed(tool=tool, ctx=ctx, args=args, arguments=arguments, local=True)
    remote = [
        t for t in review.target_fingerprint.get("targets") or [] if t["kind"] not in LOCAL_KINDS
    ]
    return text, fingerprint_of([*fingerprint["targets"], *remote])


def plan_item_preview(
    *, review: ReviewRequest, tool_name: str, arguments: dict[str, Any]
) -> tuple[str, dict[str, Any]]:
    """(the preview, the fingerprint) of a plan item a reviewer edited (issue #46;
    review.services.plans), against the workspace the plan was made on as it is at the
    decision (the dry run's copy: the spec's files with the plan's writes applied, what the
    planned items' previews and targets were read from; the real workspace is seeded the same
    way when the execution starts). Only local targets, as an edited review's: the execution
    run holds the edited call's targets on the real workspace to exactly these
    (agent.runtime.plan.plan_gate). `arguments` already satisfy the tool's schema."""
    tool = task_tool(task_id=review.task_id, name=tool_name)
    if tool is None:
        return json.dumps(arguments, indent=2, ensure_ascii=False), fingerprint_of([])
    args = tool.args_model.model_validate(arguments)
    ctx = dataclasses.replace(
        review_tool_context(review=review), workspace=review.task.plan_workspace_path
    )
    return previewed(tool=tool, ctx=ctx, args=args, arguments=arguments, local=True)
