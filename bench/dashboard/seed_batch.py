"""One seed batch: its tasks and steps as temporary tables, then the task and event rows, then
the rest (seed_calls)."""

from __future__ import annotations

from typing import Any

from bench.dashboard.rows import CREATORS, FAILURES, TERMINAL_SQL, TOOLS, _h, _insert_select
from bench.dashboard.seed_calls import _seed_calls, _seed_checkpoints, _seed_reviews


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
    _seed_temp_tables(
        cur,
        lo=lo,
        hi=hi,
        tasks=tasks,
        big_steps=big_steps,
        creators=creators,
        superuser=superuser,
        classes=classes,
        templates=templates,
        prints=prints,
    )
    _seed_tasks(cur)
    _seed_events(cur)
    _seed_calls(cur)
    _seed_checkpoints(cur, checkpoint)
    _seed_reviews(cur, reviewers=reviewers)


def _seed_temp_tables(
    cur: Any,
    *,
    lo: int,
    hi: int,
    tasks: int,
    big_steps: int,
    creators: list[int],
    superuser: bool,
    classes: str,
    templates: str,
    prints: str,
) -> None:
    """The batch's tasks (bd_task) and steps (bd_step) as temporary tables: what every insert
    of the batch selects from."""
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


def _seed_tasks(cur: Any) -> None:
    """The batch's Task rows."""
    from tasks.models import Task

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


def _seed_events(cur: Any) -> None:
    """The batch's TaskEvent rows."""
    from tasks.models import TaskEvent

    terminal = TERMINAL_SQL
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
