"""The test database of each test process, cloned from one migrated template (PostgreSQL).

pytest-django creates a test process's database by running every migration into it: three
xdist processes migrating at once took 35-48 s each of a two-core machine's start. Here the
migrations run once, into a template database named after what they consist of, and each
process's database is a copy of it (`CREATE DATABASE ... TEMPLATE`, about a second). A
template whose name matches is reused by later runs on the same server: the name is a hash
of every migration file, requirements.lock and Django's version, so a changed migration, a
new one or another lock builds a new template (and drops the stale ones), and a run on a
fresh machine builds it once. The build happens under a file lock, so the processes of one
run (and two runs side by side) build it once between them.

A database that is not PostgreSQL gets pytest-django's usual set-up."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import django
from django.conf import settings
from django.db import connections

ROOT = Path(__file__).resolve().parent.parent
ALIAS = "default"


def migrations_hash() -> str:
    """What the template's schema is made of: every migration file (path and bytes), the
    locked requirements (third-party apps' migrations, the backends) and Django's version."""
    digest = hashlib.sha256(repr(django.VERSION).encode())
    for path in sorted(ROOT.glob("*/migrations/*.py")):
        digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes())
    digest.update((ROOT / "requirements.lock").read_bytes())
    return digest.hexdigest()[:12]


def _quote(name: str) -> str:
    return connections[ALIAS].ops.quote_name(name)


@contextlib.contextmanager
def _locked(name: str) -> Iterator[None]:
    with open(Path(tempfile.gettempdir()) / f"{name}.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _databases(prefix: str) -> list[str]:
    with connections[ALIAS].creation._nodb_cursor() as cursor:
        cursor.execute("SELECT datname FROM pg_database WHERE starts_with(datname, %s)", [prefix])
        return [row[0] for row in cursor.fetchall()]


def _execute(*statements: str) -> None:
    with connections[ALIAS].creation._nodb_cursor() as cursor:
        for statement in statements:
            cursor.execute(statement)


def _template_build(template: str, verbosity: int) -> None:
    """Migrate a database of its own, then rename it to `template`: a build cut off half way
    leaves no template behind, only a `_building` database the next build replaces."""
    connection = connections[ALIAS]
    building = f"{template}_building"
    test_settings = connection.settings_dict["TEST"]
    own_name = test_settings.get("NAME")
    test_settings["NAME"] = building
    try:
        connection.creation.create_test_db(verbosity=verbosity, autoclobber=True, serialize=False)
    finally:
        test_settings["NAME"] = own_name
    connection.close()
    _execute(f"ALTER DATABASE {_quote(building)} RENAME TO {_quote(template)}")


def setup_from_template(verbosity: int) -> list[tuple[Any, str, bool]] | None:
    """This process's test database as a copy of the migrated template (built first when
    missing): Django's old_config for `teardown_databases`, or None where the database is not
    PostgreSQL (the caller then sets up as usual)."""
    connection = connections[ALIAS]
    if connection.vendor != "postgresql":
        return None
    old_name = connection.settings_dict["NAME"]
    own = connection.creation._get_test_db_name()
    prefix = f"test_{old_name}_tpl_"
    template = prefix + migrations_hash()
    with _locked(template):
        present = _databases(prefix)
        if template not in present:
            _template_build(template, verbosity)
            for stale in present:
                # Another run's template, now out of date (or a build cut off): best effort,
                # a database still in use by a run elsewhere is left for the next build.
                with contextlib.suppress(Exception):
                    _execute(f"DROP DATABASE IF EXISTS {_quote(stale)}")
        # FORCE: a process a killed run left behind (an rqworker) may still hold the old one.
        _execute(
            f"DROP DATABASE IF EXISTS {_quote(own)} WITH (FORCE)",
            f"CREATE DATABASE {_quote(own)} TEMPLATE {_quote(template)}",
        )
    settings.DATABASES[ALIAS]["NAME"] = own
    connection.settings_dict["NAME"] = own
    connection.close()
    connection.ensure_connection()
    return [(connection, old_name, True)]
