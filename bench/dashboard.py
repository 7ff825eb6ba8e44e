"""(5) Dashboard pages on a large database.

Seeds PostgreSQL server-side (INSERT … SELECT over generate_series, no rows through Python):
at full size 100,000 tasks spread over 30 days with ~2,000,000 checkpoints, ~5,000,000
events, ~1,100,000 tool calls and ~22,000 reviews (with their deciders' first page views,
decision receipts and notifications), plus one task of 1,000 steps. Then
measures, through Django's test client as a logged-in operator (middleware, view, SQL and
template rendering; no HTTP socket):

- the task list: unfiltered, filtered by status + tool, by error class + creator + date, a
  selective free-text search (trigram indexes on PostgreSQL) and sorted by title; the nav's
  search for a title — target p95 ≤ 100 ms;
- the page of the 1,000-step task (header, the timeline figure embedded — its last 100 steps in
  full, the earlier steps' failed attempts, waits, recoveries and key checkpoints on an
  overview; "Show all steps" fetches the rest — the compact event tab's first page) — target
  p95 ≤ 300 ms;
- the failure statistics page over the last 24 hours, 7 days and 30 days (tool-call and task
  statistics from the sweep's hourly roll-ups, which the seed builds as the sweep would)
  — target p95 ≤ 500 ms;
- the review SLA page over the last 24 hours and 30 days (the review roll-ups the seed builds
  as the sweep would, and the reviews of the hours not rolled yet) — the same 500 ms;
- the overview (informational).

Seeding is bounded: batches of 5,000 tasks, each its own transaction; the secondary indexes
of the big tables dropped before loading and built once after; the time of each phase is
recorded in the result's details. The seeded rows belong to dedicated `bench-dash-*` users
and are deleted afterwards; use a scratch database.

Expected run time (2 CPUs, quiet): smoke ~10 s; full ~3 min (seeding ~1.5 min, 11 pages ×
33 requests, cleanup a TRUNCATE when the database holds no other task, else ~2 min). The
same at 1,000,000 tasks: bench/dashboard_large.py.
"""

from __future__ import annotations

import gc
import json
import logging
import os
import time
from datetime import timedelta
from typing import Any

from bench.common import figure, profile_top, sample_interleaved, stats

log = logging.getLogger("bench")

TITLE = "Dashboard pages on a large database"
# The runner runs this after the others: a multi-GB seed leaves PostgreSQL busy for a while.
RUN_LAST = True
# `batch`: tasks per seeding transaction (~20 checkpoints, ~50 events, ~11 tool calls each).
# BENCH_DASHBOARD_TASKS=1000000 runs the full size with that many tasks instead.
SIZES = {
    "smoke": {"tasks": 300, "big_steps": 40, "n": 2, "warmup": 1, "batch": 100},
    "full": {
        "tasks": int(os.environ.get("BENCH_DASHBOARD_TASKS", 100_000)),
        "big_steps": 1_000,
        "n": 30,
        "warmup": 3,
        "batch": 5_000,
    },
}
TERMINAL_SQL = "('succeeded', 'failed', 'canceled')"
TARGETS_MS = {"list": 100, "task": 300, "stats": 500}
USER_PREFIX = "bench-dash-"
CREATORS = 5
# The seeded reviews: who decides them, the rules they matched and where they were decided.
REVIEWERS = 4
RULES = ["protected-config", "write-default", "execute-default", "network-egress", "secrets"]
VIAS = ["page", "page", "page", "api", "slack", "email"]
# Seeded decision receipts are numbered past any real one (they chain nothing).
RECEIPT_SEQ = 10**12
TOOLS = ["read_file", "write_file", "list_files", "run_command", "http_request", "search_text"]
# (error class, message template): the seeded failures; %s is a varying number.
FAILURES = [
    ("budget_exceeded", "max_steps=%s reached"),
    ("timeout", "session timeout: %ss exceeded (layer: session)"),
    ("model_error", "scripted model ran out of turns at turn %s"),
    ("transient", "HTTP 503 from upstream after %s attempts"),
    ("tool_crashed", "KeyError: 'field_%s'"),
    (
        "unknown_outcome",
        "call 0.%s.0 (ledger_append) was running when its worker stopped; "
        "its outcome is unknown and it is not idempotent",
    ),
]


# --- seeding ----------------------------------------------------------------------------------


def _h(expr: str, mult: int, mod: int) -> str:
    """A deterministic pseudo-random integer in [0, mod) from an integer SQL expression.
    (mod() rather than `%`, which would clash with the driver's placeholders.)"""
    return f"mod(mod(({expr})::bigint * {mult}, 1000003), {mod})"


class Param:
    """A column value passed as a query parameter rather than written as SQL."""

    def __init__(self, value: Any) -> None:
        self.value = value


def _insert_select(model: Any, exprs: dict[str, str | Param], source: str) -> tuple[str, list[Any]]:
    """INSERT INTO <model's table> (every concrete column) SELECT … FROM <source>: the given SQL
    expressions, and for every other column its Django default as a parameter, so columns
    other apps add later get their defaults without this script knowing them."""
    from django.db import connection

    columns, selects, params = [], [], []
    for field in model._meta.concrete_fields:
        if field.primary_key and field.attname not in exprs:
            continue  # serial primary keys number themselves
        columns.append(connection.ops.quote_name(field.column))
        expr = exprs.get(field.attname)
        if isinstance(expr, Param):
            selects.append("%s")
            params.append(expr.value)
        elif expr is not None:
            selects.append(expr)
        elif field.null and not field.has_default():
            selects.append("NULL")
        else:
            selects.append("%s")
            params.append(field.get_db_prep_save(field.get_default(), connection))
    sql = (
        f"INSERT INTO {connection.ops.quote_name(model._meta.db_table)} "
        f"({', '.join(columns)}) SELECT {', '.join(selects)} FROM {source}"
    )
    return sql, params


def _checkpoint_payload() -> tuple[bytes, str, int]:
    from checkpoints.services import checkpoint_encode
    from tasks.agent_state import AgentState, Message

    state = AgentState(messages=[Message(role="user", content="benchmark the dashboard")])
    return checkpoint_encode(state=state, snapshot=None)


def seed(*, tasks: int, big_steps: int, batch: int) -> dict[str, Any]:
    """Seed the tables; returns the big task's id, the row counts and the seeding times.

    Bounded by construction: tasks are loaded `batch` at a time, each batch its own
    transaction (a single multi-million-row transaction left PostgreSQL one COMMIT that ran
    for over 40 minutes, firing every deferred foreign-key check at once); the secondary
    indexes of the big tables are dropped before loading and built once after it."""
    from django.contrib.auth import get_user_model
    from django.db import connection, transaction
    from django.utils import timezone

    from checkpoints.models import Checkpoint
    from review.rollups import review_rollups_advance
    from tasks.errors import error_fingerprint
    from tasks.models import (
        Task,
    )
    from tasks.rollups import rollups_advance

    User = get_user_model()
    creators = [
        User.objects.get_or_create(username=f"{USER_PREFIX}{i}")[0].id for i in range(CREATORS)
    ]
    reviewers = [
        User.objects.get_or_create(username=f"{USER_PREFIX}reviewer-{i}")[0].id
        for i in range(REVIEWERS)
    ]
    classes = ", ".join(f"'{c}'" for c, _ in FAILURES)
    templates = ", ".join("'" + t.replace("'", "''") + "'" for _, t in FAILURES)
    prints = ", ".join(f"'{error_fingerprint(c, t % 7)}'" for c, t in FAILURES)
    payload, checksum, size = _checkpoint_payload()
    superuser = _one_plain("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
    big_tables = _big_tables()
    started = time.monotonic()
    indexes = _secondary_indexes(big_tables)
    big = None
    try:
        with connection.cursor() as cur:
            for sql in indexes:
                cur.execute(f"DROP INDEX IF EXISTS {sql.split()[2]}")
        for lo in range(0, tasks + 1, batch):
            hi = min(lo + batch, tasks + 1)
            with transaction.atomic(), connection.cursor() as cur:
                _seed_batch(
                    cur,
                    lo=lo,
                    hi=hi,
                    tasks=tasks,
                    big_steps=big_steps,
                    creators=creators,
                    reviewers=reviewers,
                    superuser=superuser,
                    classes=classes,
                    templates=templates,
                    prints=prints,
                    checkpoint=(payload, checksum, size),
                )
                if lo == 0:
                    big = _one(cur, "SELECT id FROM bd_task WHERE n = 0")
            log.info("dashboard seed: %s of %s tasks", hi, tasks + 1)
    finally:
        loaded = time.monotonic()
        with connection.cursor() as cur:
            cur.execute("SET maintenance_work_mem = '512MB'")
            for sql in indexes:
                cur.execute(sql.replace("CREATE INDEX ", "CREATE INDEX IF NOT EXISTS ", 1))
    indexed = time.monotonic()
    with connection.cursor() as cur:
        cur.execute(
            f"""UPDATE {Task._meta.db_table} t SET head_checkpoint_id = (
                SELECT c.id FROM {Checkpoint._meta.db_table} c WHERE c.task_id = t.id
                ORDER BY c.seq DESC LIMIT 1) WHERE t.id = %s""",
            [big],
        )
        for model in (Task, *big_tables):
            # As autovacuum would leave them: statistics, and the visibility map that lets
            # index-only scans skip the heap.
            cur.execute(f"VACUUM ANALYZE {model._meta.db_table}")
    vacuumed = time.monotonic()
    # What the sweep does on its own over time: roll up the finished hours for the statistics.
    while rollups_advance(now=timezone.now()):
        pass
    while review_rollups_advance(now=timezone.now()):
        pass
    rollup_models = _rollup_models()
    with connection.cursor() as cur:
        for model in rollup_models:
            cur.execute(f"VACUUM ANALYZE {model._meta.db_table}")
        counts = {
            model._meta.label: _one(cur, f"SELECT count(*) FROM {model._meta.db_table}")
            for model in (Task, *big_tables, *rollup_models)
        }
        database_bytes = _one(cur, "SELECT pg_database_size(current_database())")
    done = time.monotonic()
    return {
        "big_task": big,
        "counts": counts,
        "database_bytes": database_bytes,
        "seed_seconds": {
            "load": round(loaded - started, 1),
            "indexes": round(indexed - loaded, 1),
            "vacuum_analyze": round(vacuumed - indexed, 1),
            "rollups": round(done - vacuumed, 1),
            "total": round(done - started, 1),
        },
    }


def _seed_batch(
    cur: Any,
    *,
    lo: int,
    hi: int,
    tasks: int,
    big_steps: int,
    creators: list[int],
    reviewers: list[int],
    superuser: bool,
    classes: str,
    templates: str,
    prints: str,
    checkpoint: tuple[bytes, str, int],
) -> None:
    """Tasks number lo..hi-1 of 0..tasks, with their events, calls, checkpoints and reviews."""
    from checkpoints.models import Checkpoint
    from tasks.models import Task, TaskEvent, ToolCall

    payload, checksum, size = checkpoint
    cur.execute("SET LOCAL work_mem = '256MB'")
    cur.execute("SET LOCAL synchronous_commit = off")
    if superuser:
        # The rows are consistent by construction: skip the deferred foreign-key checks
        # (a bulk-loading switch that needs a superuser; without it each batch's COMMIT
        # checks its own rows, which a batch keeps bounded).
        cur.execute("SET LOCAL session_replication_role = replica")
    # One row per task: its number, id, step count, times, status and failure.
    cur.execute(
        f"""
        CREATE TEMP TABLE bd_task ON COMMIT DROP AS
        SELECT n, gen_random_uuid() AS id,
               CASE WHEN n = 0 THEN %s ELSE 3 + {_h("n", 7919, 17)} END AS steps,
               CASE WHEN n = 0 THEN now() - interval '1 hour'
                    ELSE now() - (n::float / %s) * interval '30 days' END AS created_at,
               CASE WHEN n = 0 THEN 100 ELSE {_h("n", 104729, 100)} END AS r,
               {_h("n", 1299709, len(FAILURES))} + 1 AS f,
               (%s::int[])[{_h("n", 31, CREATORS)} + 1] AS creator
        FROM generate_series(%s, %s) AS n""",
        [big_steps, tasks, creators, lo, hi - 1],
    )
    cur.execute(f"""
        ALTER TABLE bd_task ADD COLUMN status text, ADD COLUMN error_class text,
            ADD COLUMN error_message text, ADD COLUMN fingerprint text;
        UPDATE bd_task SET status = CASE
            WHEN r < 80 OR r = 100 THEN 'succeeded' WHEN r < 92 THEN 'failed'
            WHEN r < 95 THEN 'canceled' WHEN r = 95 THEN 'running' WHEN r = 96 THEN 'queued'
            WHEN r = 97 THEN 'waiting_review' WHEN r = 98 THEN 'retry_wait'
            ELSE 'stalled' END;
        UPDATE bd_task SET error_class = CASE status WHEN 'failed' THEN (ARRAY[{classes}])[f]
                                               WHEN 'canceled' THEN 'canceled' ELSE '' END,
            error_message = CASE WHEN status = 'failed'
                THEN format((ARRAY[{templates}])[f], mod(n, 97)) ELSE '' END,
            fingerprint = CASE WHEN status = 'failed' THEN (ARRAY[{prints}])[f] ELSE '' END;
        CREATE TEMP TABLE bd_step ON COMMIT DROP AS
        SELECT t.n, t.id AS task_id, i, t.created_at + make_interval(secs => 1 + i * 2) AS t0,
               (ARRAY[{", ".join(f"'{x}'" for x in TOOLS)}])[mod(t.n + i, {len(TOOLS)}) + 1]
                   AS tool,
               {_h("t.n * 1000 + i", 48611, 100)} AS r,
               {_h("t.n * 1000 + i", 15485863, 1000)} AS jitter
        FROM bd_task t CROSS JOIN LATERAL generate_series(0, t.steps - 1) AS i;
        ALTER TABLE bd_step ADD COLUMN status text, ADD COLUMN error_class text,
            ADD COLUMN attempts int, ADD COLUMN duration_ms float;
        UPDATE bd_step SET
            status = CASE WHEN r < 91 THEN 'succeeded' WHEN r < 96 THEN 'failed'
                          WHEN r < 99 THEN 'timed_out' ELSE 'unknown_outcome' END,
            error_class = CASE WHEN r < 91 THEN '' WHEN r < 96
                THEN (ARRAY['permanent','transient','invalid_arguments'])[mod(r, 3) + 1]
                WHEN r < 99 THEN 'timeout' ELSE 'unknown_outcome' END,
            attempts = CASE WHEN mod(jitter, 10) < 8 THEN 1 WHEN mod(jitter, 10) < 9 THEN 2
                            ELSE 3 END,
            duration_ms = 5 + (jitter * jitter) / 2000.0 + length(tool) * 3;
        -- As task_transition sets it when a task finishes: a call failed or was retried
        -- (one grouped pass; a correlated EXISTS per task is quadratic in the batch).
        ALTER TABLE bd_task ADD COLUMN calls_failed boolean NOT NULL DEFAULT false;
        UPDATE bd_task t SET calls_failed = true FROM (
            SELECT DISTINCT n FROM bd_step WHERE status <> 'succeeded' OR attempts > 1) s
        WHERE s.n = t.n AND t.status IN {TERMINAL_SQL};
        ANALYZE bd_task; ANALYZE bd_step;""")

    terminal = TERMINAL_SQL
    sql, params = _insert_select(
        Task,
        {
            "id": "id",
            "title": "format('bench task %%s: %%s report', n, "
            "(ARRAY['weekly','sales','infra','billing'])[mod(n, 4) + 1])",
            "goal": "'Write the report and check it into the workspace.'",
            "spec": """jsonb_build_object('title', 'bench', 'goal', 'g', 'tools',
                    jsonb_build_array('read_file', 'write_file'), 'budget',
                    jsonb_build_object('max_steps', steps + 5, 'max_tokens', 1000000))""",
            "status": "status",
            "current_step": "steps",
            "steps_used": "steps",
            "tokens_used": "steps * 860",
            "seconds_used": "steps * 2.0",
            "error_class": "error_class",
            "error_message": "error_message",
            "error_fingerprint": "fingerprint",
            "created_by_id": "creator",
            "created_at": "created_at",
            "started_at": "created_at + interval '1 second'",
            "finished_at": f"CASE WHEN status IN {terminal} THEN created_at + "
            "make_interval(secs => 2 + steps * 2) END",
            "updated_at": "created_at + make_interval(secs => 2 + steps * 2)",
            "attempt": "1 + (mod(n, 23) = 0)::int",
            "retry_count": "(mod(n, 23) = 0)::int",
            "redispatch_count": "(mod(n, 71) = 0)::int",
            "rollback_count": "(mod(n, 97) = 0)::int",
            "calls_failed": "calls_failed",
            # One task in five waited for reviews (up to four hours); the rolled-back ones
            # were held for up to an hour.
            "review_wait_s": f"CASE WHEN mod(n, 5) = 0 THEN 60 + {_h('n', 7919, 14400)} ELSE 0 END",
            "held_wait_s": f"CASE WHEN mod(n, 97) = 0 THEN 30 + {_h('n', 104729, 3600)} ELSE 0 END",
        },
        "bd_task",
    )
    cur.execute(sql, params)

    # Events, in id order = time order within each task.
    step_event = """CASE k
        WHEN 0 THEN jsonb_build_object('turn', i + 1, 'model', 'scripted', 'calls',
            jsonb_build_array(jsonb_build_object('call_id', format('0.%%s.0', i),
              'tool', tool, 'args', jsonb_build_object('path', format('f%%s.txt', i)))),
            'final', NULL, 'text', 'Calling ' || tool || ' to make progress on the report.',
            'prompt_tokens', 800, 'completion_tokens', 60, 'duration_ms', 400)
        WHEN 1 THEN jsonb_build_object('call_id', format('0.%%s.0', i), 'tool', tool,
            'attempt', attempts, 'args', jsonb_build_object('path', format('f%%s.txt', i)))
        WHEN 2 THEN jsonb_build_object('call_id', format('0.%%s.0', i), 'tool', tool,
            'status', status, 'attempt', attempts, 'duration_ms', duration_ms,
            'error_class', error_class)
        ELSE jsonb_build_object('step', i + 1) END"""
    sql, params = _insert_select(
        TaskEvent,
        {
            "task_id": "e.task_id",
            "type": "e.type",
            "payload": "e.payload",
            "step_index": "e.step_index",
            "actor": "''",
            "created_at": "e.at",
        },
        f"""(
        SELECT n, 0 AS seq, id AS task_id, 'created' AS type,
               jsonb_build_object('title', 'bench') AS payload, NULL::int AS step_index,
               created_at AS at FROM bd_task
        UNION ALL SELECT n, 1, id, 'status', '{{"from": "pending", "to": "queued"}}', 0,
               created_at FROM bd_task
        UNION ALL SELECT n, 2, id, 'status',
               '{{"from": "queued", "to": "running", "reason": "acquired"}}', 0,
               created_at + interval '1 second' FROM bd_task
        UNION ALL SELECT n, 3, id, 'task_started', '{{"worker": "bench:1", "epoch": 1}}', 0,
               created_at + interval '1 second' FROM bd_task
        UNION ALL SELECT n, 4 + i * 4 + k, task_id,
               (ARRAY['model_decision','tool_started','tool_finished','step_finished'])[k + 1],
               {step_event}, i + (k = 3)::int,
               t0 + make_interval(secs => (ARRAY[0.5, 0.6, 0.6, 1.9])[k + 1])
                  + CASE WHEN k = 2 THEN make_interval(secs => duration_ms / 1000)
                    ELSE interval '0' END
        FROM bd_step CROSS JOIN generate_series(0, 3) AS k
        UNION ALL SELECT n, 4 + steps * 4,
               id, CASE status WHEN 'succeeded' THEN 'task_finished' ELSE 'task_stopped' END,
               jsonb_build_object('error_class', error_class, 'message', error_message),
               steps, created_at + make_interval(secs => 1.95 + steps * 2)
        FROM bd_task WHERE status IN {terminal}
        UNION ALL SELECT n, 5 + steps * 4, id, 'status',
               jsonb_build_object('from', 'running', 'to', status, 'reason', error_message),
               steps, created_at + make_interval(secs => 2 + steps * 2)
        FROM bd_task WHERE status IN {terminal}
        ORDER BY 1, 2) AS e""",
    )
    cur.execute(sql, params)

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

    _seed_reviews(cur, reviewers=reviewers)


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


def _one_plain(sql: str) -> Any:
    from django.db import connection

    with connection.cursor() as cur:
        return _one(cur, sql)


def _rollup_models() -> tuple[Any, ...]:
    from review.models import ReviewRolledHour
    from review.rollups import DAILY
    from tasks.rollups import DAILY as TASK_DAILY
    from tasks.rollups import ROLLUP_MODELS

    review = [model for pair in DAILY for model in pair]
    return (*ROLLUP_MODELS, *(table.daily for table in TASK_DAILY), *review, ReviewRolledHour)


def _big_tables() -> tuple[Any, ...]:
    from checkpoints.models import Checkpoint
    from review.models import DecisionReceipt, Notification, ReviewRequest, ReviewView
    from tasks.models import TaskEvent, ToolCall

    return (
        TaskEvent,
        ToolCall,
        Checkpoint,
        ReviewRequest,
        ReviewView,
        DecisionReceipt,
        Notification,
    )


def _secondary_indexes(models: tuple[Any, ...]) -> list[str]:
    """CREATE INDEX statements of the tables' indexes that back no constraint (primary key,
    unique): the ones a bulk load can drop and build once afterwards."""
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute(
            """SELECT pg_get_indexdef(x.indexrelid) FROM pg_index x
               JOIN pg_class t ON t.oid = x.indrelid
               WHERE t.relname = ANY(%s) AND NOT x.indisunique AND NOT x.indisprimary
               ORDER BY 1""",
            [[model._meta.db_table for model in models]],
        )
        return [row[0] for row in cur.fetchall()]


def _has_task_id(model: Any) -> bool:
    return any(field.attname == "task_id" for field in model._meta.concrete_fields)


def _one(cur: Any, sql: str, params: list[Any] | None = None) -> Any:
    cur.execute(sql, params or [])
    return cur.fetchone()[0]


def cleanup() -> None:
    """Delete everything the seed created: TRUNCATE when the database holds no other task,
    else SQL deletes (the ORM's cascade would load rows) and VACUUM."""
    from django.contrib.auth import get_user_model
    from django.db import connection, transaction

    from review.models import DecisionReceipt, ReviewRequest
    from tasks.models import (
        AuditEntry,
        Task,
    )

    User = get_user_model()
    ids = list(User.objects.filter(username__startswith=USER_PREFIX).values_list("id", flat=True))
    if not ids:
        return
    owned = f"SELECT id FROM {Task._meta.db_table} WHERE created_by_id = ANY(%s)"
    rollups = _rollup_models()
    # The rows hanging off the seed's tasks (or off their reviews), deleted before them; the
    # seeded receipts hang off nothing and are told by their numbers.
    # (Those hanging off reviews first: they are found through their reviews.)
    owned_by_tasks = sorted(
        (model for model in (*_big_tables(), AuditEntry) if model is not DecisionReceipt),
        key=_has_task_id,
    )
    with connection.cursor() as cur:
        cur.execute(f"DELETE FROM {DecisionReceipt._meta.db_table} WHERE seq > %s", [RECEIPT_SEQ])
    if not Task.objects.exclude(created_by_id__in=ids).exists():
        # Every task (and so every row hanging off one) is the seed's: emptying the tables
        # takes seconds where deleting tens of millions of rows takes many minutes and
        # leaves them for autovacuum, which then loads the machine under the next
        # benchmark. (The audit entries of tasks other benchmarks deleted go too.)
        tables = ", ".join(model._meta.db_table for model in (Task, *rollups))
        with connection.cursor() as cur:
            cur.execute(f"TRUNCATE {tables} CASCADE")
        User.objects.filter(id__in=ids).delete()
        return
    reviews = f"SELECT id FROM {ReviewRequest._meta.db_table} WHERE task_id IN ({owned})"
    with transaction.atomic(), connection.cursor() as cur:
        cur.execute(
            f"UPDATE {Task._meta.db_table} SET head_checkpoint_id = NULL "
            "WHERE created_by_id = ANY(%s)",
            [ids],
        )
        for model in owned_by_tasks:
            rows = f"task_id IN ({owned})" if _has_task_id(model) else f"review_id IN ({reviews})"
            cur.execute(f"DELETE FROM {model._meta.db_table} WHERE {rows}", [ids])
        cur.execute(f"DELETE FROM {Task._meta.db_table} WHERE created_by_id = ANY(%s)", [ids])
        # The roll-ups now count deleted calls: drop them all; the sweep rebuilds them from
        # the calls that remain (rolling is idempotent).
        for model in rollups:
            cur.execute(f"DELETE FROM {model._meta.db_table}")
    with connection.cursor() as cur:
        # The dead rows now, not by autovacuum while the next benchmark measures.
        for model in (*owned_by_tasks, Task):
            cur.execute(f"VACUUM ANALYZE {model._meta.db_table}")
    User.objects.filter(id__in=ids).delete()


# --- measuring --------------------------------------------------------------------------------


def _client() -> Any:
    from django.contrib.auth import get_user_model
    from django.test import Client

    user, _ = get_user_model().objects.get_or_create(
        username=f"{USER_PREFIX}operator", defaults={"is_superuser": True, "is_staff": True}
    )
    client = Client()
    client.force_login(user)
    return client


def _get(client: Any, url: str) -> Any:
    def fetch() -> None:
        response = client.get(url)
        # The nav's search opens the one match it finds (a redirect to its page, which the
        # browser then loads and the task page's own row measures); several are listed.
        opened = response.status_code == 302 and url.startswith("/search/")
        if response.status_code != 200 and not opened:
            raise RuntimeError(f"GET {url} answered {response.status_code}")

    return fetch


def run(size: str) -> dict[str, Any]:
    return measure(**SIZES[size], title=TITLE)


def _wait_for_quiet() -> None:
    """BENCH_MEASURE_AFTER names a file: the pages are timed only once it exists, so a long
    seed can overlap other work and the timing still runs on a quiet machine."""
    path = os.environ.get("BENCH_MEASURE_AFTER")
    while path and not os.path.exists(path):
        log.info("dashboard: seeded; waiting for %s before timing the pages", path)
        time.sleep(30)


def measure(
    *, tasks: int, big_steps: int, n: int, warmup: int, batch: int, title: str
) -> dict[str, Any]:
    """Seed `tasks` tasks (plus the big task of `big_steps` steps), time every page, clean up."""
    from django.utils import timezone

    cleanup()
    seeded = seed(tasks=tasks, big_steps=big_steps, batch=batch)
    try:
        _wait_for_quiet()
        client = _client()
        # Serve as the web process does: harness_site/wsgi.py freezes what start-up loaded.
        gc.collect()
        gc.freeze()
        day = (timezone.now() - timedelta(days=3)).date()
        pages = {
            ("list", "task list"): "/tasks/",
            ("list", "task list: status + tool"): "/tasks/?status=failed&tool=http_request",
            (
                "list",
                "task list: error class + creator + dates",
            ): f"/tasks/?error_class=timeout&creator={USER_PREFIX}1&created_from={day}",
            ("list", "task list: free-text search"): "/tasks/?q=task+4242%3A",
            ("list", "task list: sorted by title"): "/tasks/?sort=title",
            ("list", "nav search: a title"): "/search/?q=task+4242%3A",
            ("task", f"task page, {big_steps} steps"): f"/tasks/{seeded['big_task']}/",
            ("stats", "failure statistics, 24 h"): "/stats/failures/?since=24h",
            ("stats", "failure statistics, 7 days"): "/stats/failures/?since=7d",
            ("stats", "failure statistics, 30 days"): "/stats/failures/?since=30d",
            ("stats", "review SLAs, 24 h"): "/stats/reviews/?since=24h",
            ("stats", "review SLAs, 30 days"): "/stats/reviews/?since=30d",
            (None, "overview"): "/",
        }
        samples = sample_interleaved(
            {label: _get(client, url) for (_, label), url in pages.items()}, n=n, warmup=warmup
        )
        figures, profiles = [], {}
        for (kind, label), url in pages.items():
            ours = stats(samples[label], scale=1000)
            target = TARGETS_MS.get(kind)
            met = None if target is None else ours["p95"] <= target
            figures.append(
                figure(
                    figure=f"{label} — {tasks:,} tasks",
                    unit="ms",
                    ours=ours,
                    target=f"p95 ≤ {target} ms" if target else "informational",
                    met=met,
                    note=url,
                )
            )
            if met is False:
                profiles[label] = profile_top(_get(client, url), repeat=3)
    finally:
        cleaned = time.monotonic()
        cleanup()
        seeded["seed_seconds"]["cleanup"] = round(time.monotonic() - cleaned, 1)
    counts = seeded["counts"]
    return {
        "title": title,
        "figures": figures,
        "profiles": profiles,
        "notes": (
            f"{counts['tasks.Task']:,} tasks, {counts['checkpoints.Checkpoint']:,} checkpoints, "
            f"{counts['tasks.TaskEvent']:,} events, {counts['tasks.ToolCall']:,} tool calls "
            f"({seeded['database_bytes'] / 1e9:.1f} GB; seeded in "
            f"{seeded['seed_seconds']['total']:.0f} s). "
            "Server-side time of one GET through Django's test client (middleware, "
            "view, SQL, templates), as a logged-in operator, with the database seeded "
            "as in bench/dashboard.py's docstring; pages interleaved round-robin. The "
            "statistics pages read the sweep's hourly roll-ups (tool calls, finished tasks) "
            "for whole hours and the raw rows only for the partial hours at the window's "
            "edges."
        ),
        "details": {
            "rows": counts,
            "seed_seconds": seeded["seed_seconds"],
            "database_bytes": seeded["database_bytes"],
            "big_task_steps": big_steps,
        },
    }
