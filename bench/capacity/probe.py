"""What one piece of work costs PostgreSQL and Redis, counted from inside this process: the
SQL statements every thread sent (Django's cursor, class-wide, so the tool thread's count
too), the commits, the rows each INSERT/UPDATE/DELETE touched per table, the Redis commands
and round trips (redis-py, pipelines as one round trip), the WAL the server wrote, and the CPU
seconds of this process and of its PostgreSQL backends."""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

_TICK = os.sysconf("SC_CLK_TCK")


@dataclass
class Cost:
    statements: int = 0
    commits: int = 0
    transactions: int = 0  # committed on the server (each a WAL flush): autocommit ones too
    rows: Counter = field(default_factory=Counter)  # ("inserted", table) -> rows
    redis_commands: int = 0
    redis_round_trips: int = 0
    wal_bytes: int = 0
    cpu_app_s: float = 0.0
    cpu_db_s: float = 0.0

    @property
    def round_trips(self) -> int:
        """Statements plus a BEGIN and a COMMIT per transaction (psycopg sends BEGIN before
        the first statement of a transaction, in a round trip of its own)."""
        return self.statements + 2 * self.commits

    def as_dict(self, per: float = 1.0) -> dict[str, Any]:
        rows: dict[str, dict[str, float]] = {}
        for (verb, table), n in sorted(self.rows.items()):
            rows.setdefault(table, {})[verb] = round(n / per, 2)
        return {
            "round_trips": round(self.round_trips / per, 2),
            "statements": round(self.statements / per, 2),
            "commits": round(self.commits / per, 2),
            "transactions": round(self.transactions / per, 2),
            "rows": rows,
            "rows_written": round(
                sum(n for (verb, _), n in self.rows.items() if verb != "updated_hot") / per, 2
            ),
            "redis_commands": round(self.redis_commands / per, 2),
            "redis_round_trips": round(self.redis_round_trips / per, 2),
            "wal_bytes": round(self.wal_bytes / per),
            "cpu_app_ms": round(self.cpu_app_s * 1000 / per, 3),
            "cpu_db_ms": round(self.cpu_db_s * 1000 / per, 3),
        }


def _backend_cpu() -> dict[int, float]:
    """CPU seconds so far of every PostgreSQL backend connected to this database (only this
    process uses it while the capacity benchmark runs)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
            " AND backend_type = 'client backend'"
        )
        pids = [pid for (pid,) in cursor.fetchall()]
    cpu = {}
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue  # PostgreSQL on another host or the backend already gone
        cpu[pid] = (int(fields[11]) + int(fields[12])) / _TICK
    return cpu


_STATS = (
    "SELECT relname, n_tup_ins, n_tup_upd, n_tup_hot_upd, n_tup_del FROM pg_stat_user_tables",
    "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()",
)
_VERBS = ("inserted", "updated", "updated_hot", "deleted")


def _table_stats() -> tuple[Counter, int]:
    """(rows per (verb, table), transactions committed) of this database so far: this
    connection's pending statistics flushed first (PostgreSQL 15: pg_stat_force_next_flush,
    acted on when the next transaction ends)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_force_next_flush()")
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute(_STATS[0])
        rows: Counter = Counter()
        for table, *counts in cursor.fetchall():
            for verb, n in zip(_VERBS, counts, strict=True):
                rows[(verb, table)] = n
        cursor.execute(_STATS[1])
        return rows, int(cursor.fetchone()[0])


def _wal_lsn() -> str:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_current_wal_lsn()::text")
        return cursor.fetchone()[0]


def _wal_diff(start: str, end: str) -> int:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_wal_lsn_diff(%s::pg_lsn, %s::pg_lsn)::bigint", [end, start])
        return int(cursor.fetchone()[0])


def _metrics_flusher() -> bool:
    """Whether this is the process's metrics thread (harness_base.metrics: the buffered
    counters sent to Redis once a second whatever runs), whose pipeline falls inside a measured
    window or not by the clock: not a cost of the work measured."""
    return threading.current_thread().name == "metrics-flush"


class Probe:
    """`with Probe() as cost: work()` fills `cost` with what `work` cost. Not reentrant."""

    def __init__(self) -> None:
        self.cost = Cost()
        self._lock = threading.Lock()
        self._saved: list[tuple[Any, str, Any]] = []

    def _patch(self, owner: Any, name: str, make: Any) -> None:
        original = getattr(owner, name)
        self._saved.append((owner, name, original))
        setattr(owner, name, make(original))

    def _count_sql(self) -> None:
        with self._lock:
            self.cost.statements += 1

    def _patches(self) -> None:
        from django.db.backends.base.base import BaseDatabaseWrapper
        from django.db.backends.utils import CursorWrapper
        from redis.client import Pipeline, Redis

        probe = self

        def execute(original: Any) -> Any:
            def wrapped(cursor: Any, sql: str, *args: Any) -> Any:
                try:
                    return original(cursor, sql, *args)
                finally:
                    probe._count_sql()

            return wrapped

        def commit(original: Any) -> Any:
            def wrapped(db: Any) -> Any:
                with probe._lock:
                    probe.cost.commits += 1
                return original(db)

            return wrapped

        def command(original: Any) -> Any:
            def wrapped(client: Any, *args: Any, **options: Any) -> Any:
                if not _metrics_flusher():
                    with probe._lock:
                        probe.cost.redis_commands += 1
                        probe.cost.redis_round_trips += 1
                return original(client, *args, **options)

            return wrapped

        def pipeline(original: Any) -> Any:
            def wrapped(pipe: Any, *args: Any, **options: Any) -> Any:
                if not _metrics_flusher():
                    with probe._lock:
                        probe.cost.redis_commands += len(pipe.command_stack)
                        probe.cost.redis_round_trips += 1 if pipe.command_stack else 0
                return original(pipe, *args, **options)

            return wrapped

        self._patch(CursorWrapper, "_execute", execute)
        self._patch(CursorWrapper, "_executemany", execute)
        self._patch(BaseDatabaseWrapper, "_commit", commit)
        self._patch(Redis, "execute_command", command)
        self._patch(Pipeline, "execute", pipeline)

    # Transactions the probe's own statements add between its two readings.
    _OWN_XACTS: int | None = None

    def __enter__(self) -> Cost:
        if Probe._OWN_XACTS is None:
            Probe._OWN_XACTS = 0
            with Probe() as empty:
                pass
            Probe._OWN_XACTS = empty.transactions
        self._backends = _backend_cpu()
        self._lsn = _wal_lsn()
        self._rows, self._xacts = _table_stats()
        self._cpu = time.process_time()
        self._patches()
        return self.cost

    def __exit__(self, *exc: Any) -> None:
        for owner, name, original in reversed(self._saved):
            setattr(owner, name, original)
        self._saved.clear()
        self.cost.cpu_app_s = time.process_time() - self._cpu
        rows, xacts = _table_stats()
        rows.subtract(self._rows)
        self.cost.rows = +rows
        self.cost.transactions = xacts - self._xacts - (Probe._OWN_XACTS or 0)
        self.cost.wal_bytes = _wal_diff(self._lsn, _wal_lsn())
        after = _backend_cpu()
        self.cost.cpu_db_s = sum(cpu - self._backends.get(pid, 0.0) for pid, cpu in after.items())


def cost_minus(a: Cost, b: Cost) -> Cost:
    """a − b, field by field: the marginal cost of what a did beyond b."""
    rows = Counter(a.rows)
    rows.subtract(b.rows)
    return Cost(
        statements=a.statements - b.statements,
        commits=a.commits - b.commits,
        transactions=a.transactions - b.transactions,
        rows=+rows,
        redis_commands=a.redis_commands - b.redis_commands,
        redis_round_trips=a.redis_round_trips - b.redis_round_trips,
        wal_bytes=a.wal_bytes - b.wal_bytes,
        cpu_app_s=a.cpu_app_s - b.cpu_app_s,
        cpu_db_s=a.cpu_db_s - b.cpu_db_s,
    )
