"""How the harness tells the model what went wrong with a call (a failed check, a rejected or
refused call): the loop and the review service both speak to the model this way."""

from __future__ import annotations

import json
from typing import Any

FEEDBACK_LINE_CHARS = 300
EDIT_NOTE_KEYS = 8
EDIT_NOTE_VALUE_CHARS = 120
_ABSENT = object()


def compact_feedback(*, what: str, expected: str, check: str) -> str:
    """Feedback to the model: at most three short lines."""
    return "\n".join(
        " ".join(line.split())[:FEEDBACK_LINE_CHARS]
        for line in (f"Error: {what}", f"Expected: {expected}", f"Check: {check}")
    )


def _short(value: Any) -> str:
    if value is _ABSENT:
        return "(absent)"
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= EDIT_NOTE_VALUE_CHARS else text[: EDIT_NOTE_VALUE_CHARS - 3] + "..."


def edited_call_note(
    *, proposed: dict[str, Any], ran: dict[str, Any], by: str, comment: str
) -> str:
    """The line before the result of a call a reviewer edited: it ran with the reviewer's
    arguments, not the model's, and which ones changed (so the model's history matches
    what ran)."""
    changed = sorted(
        key for key in {*proposed, *ran} if proposed.get(key, _ABSENT) != ran.get(key, _ABSENT)
    )
    parts = [
        f"{key}: {_short(proposed.get(key, _ABSENT))} -> {_short(ran.get(key, _ABSENT))}"
        for key in changed[:EDIT_NOTE_KEYS]
    ]
    if len(changed) > EDIT_NOTE_KEYS:
        parts.append(f"and {len(changed) - EDIT_NOTE_KEYS} more")
    note = (
        f"Note: a reviewer ({by or 'an operator'}) edited this call before it ran; it ran with "
        f"the reviewer's arguments, not the ones you proposed. Changed: {'; '.join(parts)}."
    )
    if comment:
        note += f" Reviewer's comment: {' '.join(comment.split())[:FEEDBACK_LINE_CHARS]}"
    return note
