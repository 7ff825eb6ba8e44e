"""The three facts of an edited approval: what the model proposed, what was approved (who
edited it, the diff) and what ran."""

from __future__ import annotations

import difflib
import json
from typing import Any

from review.models import ReviewRequest, ReviewStatus
from tasks.canonical import canonical_hash

# A string argument longer than this (or with a line break) is shown edited as a line diff.
LONG_TEXT_CHARS = 80


def arguments_diff(*, proposed: Any, approved: Any) -> str:
    """A unified diff of two argument objects as indented JSON (proposed -> approved)."""

    def lines(value: Any) -> list[str]:
        return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False).splitlines()

    return "\n".join(
        difflib.unified_diff(
            lines(proposed), lines(approved), "proposed", "approved", lineterm="", n=2
        )
    )


def _long_text(*values: Any) -> bool:
    return all(isinstance(v, str) for v in values) and any(
        "\n" in v or len(v) > LONG_TEXT_CHARS for v in values
    )


def review_edit_changes(*, review: ReviewRequest) -> list[dict[str, Any]]:
    """The edit argument by argument (ReviewRequest.edit_changes), for the review page: a long
    or multi-line string (a file's content) as a line diff of the text, proposed -> edited;
    any other value as its JSON before and after (None where the argument was absent)."""
    shown = []
    for change in review.edit_changes:
        name, proposed, edited = change["argument"], change["proposed"], change["edited"]
        if _long_text(proposed, edited):
            lines = difflib.unified_diff(
                proposed.splitlines(keepends=True),
                edited.splitlines(keepends=True),
                f"{name} (proposed)",
                f"{name} (edited)",
            )
            # A last line without a line break is marked, as git does, so adding or removing
            # the final newline shows as a change.
            diff = "".join(
                line if line.endswith("\n") else f"{line}\n\\ No newline at end of text\n"
                for line in lines
            )
            shown.append({"argument": name, "diff": diff})
            continue
        shown.append(
            {
                "argument": name,
                "proposed": json.dumps(proposed, ensure_ascii=False)
                if name in review.original_arguments
                else None,
                "edited": json.dumps(edited, ensure_ascii=False)
                if name in (review.edited_arguments or {})
                else None,
            }
        )
    return shown


def review_edit(*, review: ReviewRequest) -> dict[str, Any] | None:
    """Who edited the arguments under review, with their comment and the diff proposed ->
    approved; None when nobody did. The editor is the first operator whose approval names
    the edited arguments (an approval records the hash of what it approves)."""
    if review.edited_arguments is None:
        return None
    first = (
        review.approvals.filter(arguments_hash=canonical_hash(review.edited_arguments))
        .select_related("user")
        .order_by("at", "id")
        .first()
    )
    return {
        "by": first.user.get_username() if first else "",
        "comment": first.comment if first else "",
        "at": first.at if first else None,
        "diff": arguments_diff(
            proposed=review.original_arguments, approved=review.edited_arguments
        ),
    }


def review_facts(*, review: ReviewRequest) -> dict[str, Any]:
    """The three facts of a review, each with its hash: what the model proposed, what was
    approved (with who edited it and why) and what ran. `approved` is None until the review
    is approved; `executed` is None until the call started with exactly the approved
    arguments (the loop runs nothing else)."""
    edit = review_edit(review=review)
    approved = None
    if review.status == ReviewStatus.APPROVED:
        approved = {
            "arguments": review.arguments,
            "arguments_hash": canonical_hash(review.arguments),
            "edited": edit is not None,
            "edited_by": edit["by"] if edit else None,
            "comment": edit["comment"] if edit else review.comment,
        }
    call = review.tool_call
    executed = None
    if approved is not None and call.started_at is not None:
        ran_hash = canonical_hash(call.arguments)
        if ran_hash == approved["arguments_hash"]:
            executed = {
                "arguments": call.arguments,
                "arguments_hash": ran_hash,
                "started_at": call.started_at,
                "status": call.status,
            }
    return {
        "proposed": {
            "arguments": review.original_arguments,
            "arguments_hash": canonical_hash(review.original_arguments),
        },
        "approved": approved,
        "executed": executed,
        "edit": edit,
    }


def call_edit(*, tool_call_id: Any, arguments_hash: str) -> dict[str, Any] | None:
    """The edit behind a call about to run with `arguments_hash`: review_edit of its
    approved review whose edited arguments have that hash (None: the call runs as
    proposed)."""
    for review in ReviewRequest.objects.filter(
        tool_call_id=tool_call_id, status=ReviewStatus.APPROVED, edited_arguments__isnull=False
    ).order_by("-decided_at", "-id"):
        if canonical_hash(review.edited_arguments) == arguments_hash:
            return review_edit(review=review)
    return None
