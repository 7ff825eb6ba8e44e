"""The review rules in evaluation order (`policy_rules`): the enabled admin rules (`ReviewRule`,
kind `policy`, by position), then harness.yaml's `review_rules`. Read for every tool call."""

from __future__ import annotations

import functools
from typing import Any

from django.db import connection

from harness_base.config import ReviewRuleConfig, harness_config
from review.models import ReviewRule, RuleKind
from tasks.services.prepared import numbered, raw_cursor


def policy_rules() -> list[tuple[str, ReviewRuleConfig]]:
    """(source, rule) in evaluation order: admin rules first, then harness.yaml. The admin
    rules are read from the database for every call (an operator's new rule applies to the
    next call of every running task); the query is compiled once per process and, on
    PostgreSQL, kept prepared on the connection."""
    admin = [("admin", rule.as_config()) for rule in _enabled_admin_rules()]
    return admin + [("harness.yaml", rule) for rule in harness_config().review_rules]


def _enabled_admin_rules() -> list[ReviewRule]:
    vendor = connection.vendor
    sql, params, names = _enabled_admin_rules_sql(vendor)
    if vendor == "postgresql":
        # Prepared: PostgreSQL parsed and planned the 32-column SELECT on every tool call.
        cursor = raw_cursor(connection, prepare=True)
    else:
        cursor = connection.cursor()
    with cursor:
        cursor.execute(sql, params)
        return [ReviewRule.from_db(connection.alias, names, row) for row in cursor.fetchall()]


@functools.cache
def _enabled_admin_rules_sql(vendor: str) -> tuple[str, tuple[Any, ...], list[str]]:
    """The enabled rules' SELECT (every concrete column, the model's ordering), compiled for
    this database vendor (on PostgreSQL with `$n` placeholders, for tasks.services.prepared):
    compiling it cost twice its round trip, on every tool call."""
    # Standing rules are no part of the policy (review.standing): they stand in for an approval.
    sql, params = ReviewRule.objects.filter(
        enabled=True, kind=RuleKind.POLICY
    ).query.sql_with_params()
    if vendor == "postgresql":
        sql = numbered(sql)
    return sql, tuple(params), [f.attname for f in ReviewRule._meta.concrete_fields]
