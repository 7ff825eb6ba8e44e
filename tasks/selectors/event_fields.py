"""Event payload keys read in SQL (PayloadText), timestamps as ISO text (as_text) and back
(iso_datetime): what the pages that plot thousands of events read instead of whole rows."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django.db.models import CharField
from django.db.models.fields.json import (  # type: ignore[attr-defined]  # django-stubs omits compile_json_path
    KeyTextTransform,
    compile_json_path,
)
from django.db.models.functions import Cast

# Payload keys the timeline and the compact event view read. Extracted in SQL (->>) so a
# 1,000-step task's page never decodes its model transcripts.
_EVENT_KEYS = (
    "call_id",
    "tool",
    "status",
    "attempt",
    "error_class",
    "duration_ms",
    "from",
    "to",
    "reason",
    "decision",
    "step",
    "turn",
    "from_seq",
    "seq",
    "prompt_tokens",
    "completion_tokens",
    "cost_usd",
    "node",
    "plan",  # task_started of a plan task: its phase (plan, execution)
)


class PayloadText(KeyTextTransform):
    """A top-level payload key as text, a JSON null as SQL NULL on every backend. (Django's
    key transform gives SQLite the text 'null' for a JSON null: a model retry's
    `"call_id": null` became a tool call named "null".)"""

    def __init__(self, key: str) -> None:
        super().__init__(key, "payload")

    def as_sqlite(
        self, compiler: Any, connection: Any, **extra_context: Any
    ) -> tuple[str, tuple[Any, ...]]:
        sql, params = super().as_sqlite(compiler, connection, **extra_context)
        lhs, lhs_params, keys = self.preprocess_lhs(compiler, connection)
        path = compile_json_path(keys)
        return (
            f"(CASE WHEN JSON_TYPE({lhs}, %s) = 'null' THEN NULL ELSE {sql} END)",
            (*lhs_params, path, *params),
        )


def payload_keys() -> dict[str, PayloadText]:
    return {key: PayloadText(key) for key in _EVENT_KEYS}


def as_text(field: str) -> Cast:
    """A timestamp column as ISO text, for datetime.fromisoformat: a page that plots
    thousands of timestamps skips the driver's per-value time-zone conversion."""
    return Cast(field, output_field=CharField())


def iso_datetime(value: Any) -> datetime | None:
    """A datetime from ISO text, as events and attempt logs store it (SQLite's has no offset:
    it is UTC); None for what is not one."""
    if isinstance(value, datetime):
        return value
    try:
        parsed = datetime.fromisoformat(str(value))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
