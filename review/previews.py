"""What a call would do with arguments an operator edited: the same preview function the
pause used (tasks.fingerprint.previewed), run in the web process against the call's targets
as they are now. An edited approval stores it (`ReviewRequest.edited_preview`), so every page
and message that offers a decision shows the effect of exactly the arguments it binds."""

from __future__ import annotations

import json
from typing import Any

from review.models import ReviewRequest
from review.recheck import review_targets_now
from tasks.fingerprint import LOCAL_KINDS, fingerprint_of, previewed


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
