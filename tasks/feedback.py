"""How the harness tells the model what went wrong with a call (a failed check, a rejected or
refused call): the loop and the review service both speak to the model this way."""

from __future__ import annotations

FEEDBACK_LINE_CHARS = 300


def compact_feedback(*, what: str, expected: str, check: str) -> str:
    """Feedback to the model: at most three short lines."""
    return "\n".join(
        " ".join(line.split())[:FEEDBACK_LINE_CHARS]
        for line in (f"Error: {what}", f"Expected: {expected}", f"Check: {check}")
    )
