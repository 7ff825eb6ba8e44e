"""A seed batch's tool calls, checkpoints and reviews (with their deciders' views, receipts
and notifications), selected from the batch's temporary tables."""

from __future__ import annotations

import json
from typing import Any

from bench.dashboard.rows import (
    RECEIPT_SEQ,
    REVIEWERS,
    RULES,
    USER_PREFIX,
    VIAS,
    Param,
    _h,
    _insert_select,
)


def _seed_calls(cur: Any) -> None:
    """The batch's ToolCall rows, with their attempts."""
    from tasks.models import ToolCall

    sql, params = _insert_select(
        ToolCall,
        {
            "task_id": "task_id",
            "call_id": "format('0.%%s.0', i)",
            "tool": "tool",
            "arguments": "jsonb_build_object('path', format('f%%s.txt', i))",
            "risk": "CASE WHEN tool IN ('write_file','run_command') THEN 'write' ELSE 'read' END",
            "status": "status",
            "step_index": "i",
            "result": "CASE WHEN status = 'succeeded' THEN '{\"ok\": true}'::jsonb ELSE "
            "jsonb_build_object('observation', 'Error: ' || error_class) END",
            "error_class": "error_class",
            "error_message": "CASE WHEN error_class = '' THEN '' ELSE "
            "format('%%s failed after %%s ms', tool, round(duration_ms)) END",
            "attempts": "attempts",
            "attempt_log": """(SELECT jsonb_agg(jsonb_build_object('n', a,
                'started_at', t0 + make_interval(secs => 0.6 + (a - 1) * 0.2),
                'finished_at', t0 + make_interval(secs => 0.6 + (a - 1) * 0.2
                                                   + duration_ms / 1000),
                'status', CASE WHEN a < attempts THEN 'failed' ELSE status END,
                'error_class', CASE WHEN a < attempts THEN 'transient' ELSE error_class END,
                'error_message', CASE WHEN a < attempts THEN 'HTTP 503' ELSE '' END))
            FROM generate_series(1, attempts) AS a)""",
            "created_at": "t0 + interval '0.55 seconds'",
            "started_at": "t0 + interval '0.6 seconds'",
            "finished_at": "t0 + make_interval(secs => 0.6 + duration_ms / 1000)",
            "duration_ms": "duration_ms",
        },
        "bd_step ORDER BY n, i",
    )
    cur.execute(sql, params)


def _seed_checkpoints(cur: Any, checkpoint: tuple[bytes, str, int]) -> None:
    """The batch's checkpoints: one at the start of each task, one before each write and after
    each step; every one has the same payload."""
    from checkpoints.models import Checkpoint

    payload, checksum, size = checkpoint
    sql, params = _insert_select(
        Checkpoint,
        {
            "id": "gen_random_uuid()",
            "task_id": "c.task_id",
            "seq": "row_number() OVER (PARTITION BY c.task_id ORDER BY c.at, c.k)",
            "level": "c.level",
            "trigger": "c.trigger",
            "step_index": "c.step_index",
            "payload": Param(payload),
            "checksum": Param(checksum),
            "size_bytes": Param(size),
            "superseded": "c.superseded",
            "created_at": "c.at",
        },
        """(
        SELECT id AS task_id, -1 AS k, 'task' AS level, 'task_start' AS trigger,
               0 AS step_index, false AS superseded,
               created_at + interval '0.9 seconds' AS at FROM bd_task
        UNION ALL SELECT task_id, 0,
               CASE WHEN tool IN ('write_file','run_command') THEN 'tool' ELSE 'step' END,
               CASE WHEN tool IN ('write_file','run_command') THEN 'before_write_operation'
                    ELSE 'after_model' END,
               i, mod(n, 97) = 0 AND i > 1, t0 + interval '0.55 seconds'
        FROM bd_step WHERE mod(i, 4) <> 3
        UNION ALL SELECT task_id, 1, 'step', 'after_step', i + 1, mod(n, 97) = 0 AND i > 1,
               t0 + interval '1.95 seconds' FROM bd_step) AS c""",
    )
    cur.execute(sql, params)


def _seed_reviews(cur: Any, *, reviewers: list[int]) -> None:
    """One review per 50 tool calls of the batch, as the gate leaves them: rules, tools and
    deciders spread, decision times from seconds to about an hour, most deciders having viewed
    the page first, decisions made on the page, through the API, Slack or an email link, the
    young ones still pending, and a few failed notifications."""
    from review.models import DecisionReceipt, Notification, ReviewRequest, ReviewView
    from tasks.models import ToolCall

    rules = ", ".join(
        "'" + json.dumps({"name": name, "action": "review", "source": "harness.yaml"}) + "'"
        for name in RULES
    )
    vias = ", ".join(f"'{via}'" for via in VIAS)
    table = ReviewRequest._meta.db_table
    cur.execute(
        f"""
        CREATE TEMP TABLE bd_review ON COMMIT DROP AS
        SELECT nextval(pg_get_serial_sequence('{table}', 'id')) AS id, c.id AS call_id,
               c.task_id, c.tool, c.risk, c.arguments, c.created_at AS at,
               {_h("c.id / 50", 7919, 100)} AS r, {_h("c.id / 50", 104729, 1000)} AS jitter,
               {_h("c.id / 50", 1299709, 100)} AS v, {_h("c.id / 50", 15485863, 120)} AS s,
               (%s::int[])[{_h("c.id / 50", 48611, REVIEWERS)} + 1] AS reviewer
        FROM {ToolCall._meta.db_table} c JOIN bd_task t ON t.id = c.task_id
        WHERE mod(c.id, 50) = 0;
        ALTER TABLE bd_review ADD COLUMN status text, ADD COLUMN decided_at timestamptz,
            ADD COLUMN rules jsonb;
        UPDATE bd_review SET
            status = CASE WHEN at > now() - interval '3 hours' AND r < 50 THEN 'pending'
                WHEN r < 45 THEN 'approved' WHEN r < 65 THEN 'rejected'
                WHEN r < 85 THEN 'expired' ELSE 'canceled' END,
            rules = CASE WHEN mod(s, 7) = 0
                THEN jsonb_build_array((ARRAY[{rules}]::jsonb[])[mod(s, {len(RULES)}) + 1],
                                       (ARRAY[{rules}]::jsonb[])[mod(s + 1, {len(RULES)}) + 1])
                ELSE jsonb_build_array((ARRAY[{rules}]::jsonb[])[mod(s, {len(RULES)}) + 1]) END;
        UPDATE bd_review SET decided_at = CASE status WHEN 'pending' THEN NULL
            WHEN 'expired' THEN at + interval '4 hours'
            ELSE at + make_interval(secs => 5 + jitter * jitter / 250.0) END;
        ANALYZE bd_review;""",
        [reviewers],
    )
    human = "status IN ('approved', 'rejected')"
    for model, exprs, source in (
        (
            ReviewRequest,
            {
                "id": "id",
                "task_id": "task_id",
                "tool_call_id": "call_id",
                "tool": "tool",
                "risk": "risk",
                "status": "status",
                "matched_rules": "rules",
                "original_arguments": "arguments",
                "edited_arguments": "CASE WHEN status = 'approved' AND mod(v, 6) = 1 "
                "THEN arguments END",
                "requested_at": "at",
                "expires_at": "at + interval '4 hours'",
                "decided_at": "decided_at",
                "decided_by_id": f"CASE WHEN {human} THEN reviewer END",
            },
            "bd_review",
        ),
        (
            # Three deciders in four viewed the page first, 40% of the way to their decision.
            ReviewView,
            {
                "review_id": "id",
                "user_id": "reviewer",
                "first_viewed_at": "at + (decided_at - at) * 0.4",
            },
            f"bd_review WHERE {human} AND v < 75",
        ),
        (
            DecisionReceipt,
            {
                "seq": f"{RECEIPT_SEQ} + id",
                "at": "decided_at",
                "review_id": "id",
                "task_id": "task_id",
                "decision": "CASE status WHEN 'approved' THEN 'approve' ELSE 'reject' END",
                "via": f"(ARRAY[{vias}])[mod(s, {len(VIAS)}) + 1]",
                "actor": f"'{USER_PREFIX}reviewer'",
                "actor_user_id": "reviewer",
                "subject": "jsonb_build_object('tool', tool)",
                "prev_hash": "''",
                "hash": "md5(id::text) || md5('receipt ' || id)",
            },
            f"bd_review WHERE {human}",
        ),
        (
            # Every review notified one channel; one send in forty failed for good.
            Notification,
            {
                "review_id": "id",
                "channel": "'ops-mail'",
                "kind": "'email'",
                "event": "'review.requested'",
                "status": "CASE WHEN mod(jitter, 40) = 3 THEN 'failed' ELSE 'sent' END",
                "attempts": "CASE WHEN mod(jitter, 40) = 3 THEN 5 ELSE 1 END",
                "last_error": "CASE WHEN mod(jitter, 40) = 3 THEN 'SMTP 451' ELSE '' END",
                "created_at": "at",
                "last_attempt_at": "at + interval '2 seconds'",
                "sent_at": "CASE WHEN mod(jitter, 40) = 3 THEN NULL "
                "ELSE at + interval '2 seconds' END",
            },
            "bd_review",
        ),
    ):
        sql, params = _insert_select(model, exprs, source)
        cur.execute(sql, params)
