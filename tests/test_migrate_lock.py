"""Web servers starting together migrate one at a time (`harness web`: the migration lock), and
the one that waits must not break the one that migrates. Migrations build indexes CONCURRENTLY
(tests/test_migrations_online.py), and CREATE INDEX CONCURRENTLY waits for every transaction
holding an older snapshot: a waiter blocked inside pg_advisory_lock holds one, while it waits
for the lock the migrating session holds. PostgreSQL then finds a deadlock and aborts one of
them (before migrate_lock_wait tried the lock instead of waiting in it)."""

from __future__ import annotations

import threading

import psycopg
import pytest
from django.db import connection

from harness_site.cli.production import _MIGRATE_LOCK, migrate_lock_wait
from tests.conftest import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def _connect() -> psycopg.Connection:
    settings = connection.settings_dict
    return psycopg.connect(
        dbname=settings["NAME"],
        user=settings["USER"],
        password=settings["PASSWORD"] or None,
        host=settings["HOST"] or None,
        port=settings["PORT"] or None,
        autocommit=True,
    )


def test_a_server_waiting_to_migrate_lets_the_migrating_one_build_an_index_concurrently():
    migrating, waiting = _connect(), _connect()
    got_it = threading.Event()
    failed: list[BaseException] = []

    def wait() -> None:
        try:
            with waiting.cursor() as cursor:
                migrate_lock_wait(cursor, poll_s=0.05)
            got_it.set()
        except BaseException as exc:  # the deadlock, reported below
            failed.append(exc)

    try:
        migrating.execute("SELECT pg_advisory_lock(%s)", [_MIGRATE_LOCK])
        waiter = threading.Thread(target=wait)
        waiter.start()
        # The waiter is after the lock before the index build begins.
        probe = "SELECT query FROM pg_stat_activity WHERE pid = %s"
        pid = waiting.info.backend_pid
        wait_for(
            lambda: failed or "advisory_lock" in migrating.execute(probe, [pid]).fetchone()[0],
            message="the second server to ask for the migration lock",
        )
        migrating.execute("SET lock_timeout = '30s'")
        migrating.execute("CREATE INDEX CONCURRENTLY migrate_lock_probe ON tasks_task (title)")
        assert not got_it.is_set() and not failed
        migrating.execute("SELECT pg_advisory_unlock(%s)", [_MIGRATE_LOCK])
        waiter.join(30)
        assert failed == []
        assert got_it.is_set()
    finally:
        migrating.execute("DROP INDEX IF EXISTS migrate_lock_probe")
        waiting.execute("SELECT pg_advisory_unlock_all()")
        migrating.close()
        waiting.close()
