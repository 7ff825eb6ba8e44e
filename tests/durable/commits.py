"""Counting a worker's durable writes: the COMMITs of transactions that changed rows, as this
thread's database connection sends them.

A statement run in autocommit mode is its own transaction (a fenced write is one such
statement); an `atomic()` block commits once, when its outermost block exits. Statements that
only read (SELECT, SAVEPOINT, SET…) commit nothing durable and are not counted. Only the
connection of the thread that opens the counter is watched: the heartbeat thread and the
tools' helper threads have connections of their own."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections

_WRITE = re.compile(r"^\s*(INSERT|UPDATE|DELETE|MERGE)\b", re.IGNORECASE)
_WITH_WRITE = re.compile(r"^\s*WITH\b.*\b(INSERT\s+INTO|UPDATE|DELETE\s+FROM)\b", re.I | re.S)
_LOCK = re.compile(r"^\s*SELECT\b.*\bFOR\s+(NO\s+KEY\s+)?(UPDATE|SHARE)\b", re.I | re.S)
_TABLE = re.compile(r'\b(?:INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+"?(\w+)"?', re.IGNORECASE)


def writes(sql: str) -> bool:
    """Whether the statement changes (or locks) rows."""
    return bool(_WRITE.match(sql) or _WITH_WRITE.match(sql) or _LOCK.match(sql))


@dataclass
class Commit:
    """One committed write transaction: the tables it wrote, in order."""

    tables: list[str] = field(default_factory=list)
    statements: int = 0

    def add(self, sql: str) -> None:
        self.statements += 1
        for table in _TABLE.findall(sql):
            if table not in self.tables:
                self.tables.append(table)


@dataclass
class CommitCounter:
    commits: list[Commit] = field(default_factory=list)
    _open: Commit | None = None

    def __len__(self) -> int:
        return len(self.commits)

    def __call__(self, execute: Any, sql: str, params: Any, many: bool, context: dict) -> Any:
        result = execute(sql, params, many, context)
        db = context["connection"]
        if writes(sql):
            if db.in_atomic_block:
                self._open = self._open or Commit()
                self._open.add(sql)
            elif db.get_autocommit():
                commit = Commit()
                commit.add(sql)
                self.commits.append(commit)
        return result

    def committed(self) -> None:
        if self._open is not None:
            self.commits.append(self._open)
        self._open = None

    def rolled_back(self) -> None:
        self._open = None


@contextmanager
def count_commits() -> Iterator[CommitCounter]:
    """Count the write transactions this thread's connection commits inside the block."""
    db = connections[DEFAULT_DB_ALIAS]  # this thread's connection
    counter = CommitCounter()
    commit, rollback = db.commit, db.rollback

    def counted_commit() -> None:
        commit()
        counter.committed()

    def counted_rollback() -> None:
        rollback()
        counter.rolled_back()

    db.commit, db.rollback = counted_commit, counted_rollback
    try:
        with db.execute_wrapper(counter):
            yield counter
    finally:
        del db.commit, db.rollback
