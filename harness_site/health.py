"""`/healthz` and `/readyz`, as Kubernetes means them, for load balancers and service managers:
no login, nothing revealed beyond the answer (no versions, hosts or error text: the reasons go
to this process's log), cheap, and quick to say no.

- `/healthz`: this process serves requests (200 `{"ok": true}`); it touches nothing else.
- `/readyz`: the database answers and has every migration of this code applied, and Redis
  answers: 200 `{"ready": true, "failing": []}`, else 503 naming the failing parts
  (`database`, `migrations`, `redis`). Each probe opens its own connection with a short
  timeout (READY_TIMEOUT_S), so a PostgreSQL that is down or unreachable yields a 503 within
  seconds instead of a request stuck behind the pooled connection.
"""

from __future__ import annotations

import copy
import functools
import logging

from django.conf import settings
from django.db import connections
from django.db.utils import load_backend
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe

log = logging.getLogger(__name__)

# libpq's connect_timeout has a floor of 2 s; the same bound serves the query and Redis.
READY_TIMEOUT_S = 2


@functools.cache
def _migrations_expected() -> frozenset[tuple[str, str]]:
    """The leaf migration of each app in this code (read from disk once per process)."""
    from django.db.migrations.loader import MigrationLoader

    return frozenset(MigrationLoader(None, ignore_no_migrations=True).graph.leaf_nodes())


def _database_probe() -> str | None:
    """None when the database answers and is migrated; else the name of what fails."""
    conf = copy.deepcopy(connections["default"].settings_dict)
    if conf["ENGINE"].endswith("postgresql"):
        options = conf.setdefault("OPTIONS", {})
        options["connect_timeout"] = READY_TIMEOUT_S
        timeout = f"-c statement_timeout={READY_TIMEOUT_S * 1000}"
        options["options"] = f"{options.get('options', '')} {timeout}".strip()
    probe = load_backend(conf["ENGINE"]).DatabaseWrapper(conf, alias="readyz")
    try:
        try:
            probe.ensure_connection()
        except Exception:
            log.warning("readyz: the database does not answer", exc_info=True)
            return "database"
        try:
            with probe.cursor() as cursor:
                cursor.execute("SELECT app, name FROM django_migrations")
                applied = set(cursor.fetchall())
        except Exception:
            log.warning("readyz: the database has no migration table", exc_info=True)
            return "migrations"
        missing = _migrations_expected() - applied
        if missing:
            log.warning("readyz: %d app(s) not migrated: %s", len(missing), sorted(missing))
            return "migrations"
        return None
    finally:
        probe.close()


def _redis_probe() -> str | None:
    import redis
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    # One try: redis-py's default retries would multiply the timeout.
    client = redis.Redis.from_url(
        settings.REDIS_URL,
        socket_connect_timeout=READY_TIMEOUT_S,
        socket_timeout=READY_TIMEOUT_S,
        retry=Retry(NoBackoff(), 0),
    )
    try:
        client.ping()
    except (redis.RedisError, OSError):
        log.warning("readyz: Redis does not answer", exc_info=True)
        return "redis"
    finally:
        client.close()
    return None


def readiness_failing() -> list[str]:
    """The parts a request or a job needs that do not answer right now, in a stable order."""
    return [name for name in (_database_probe(), _redis_probe()) if name is not None]


@never_cache
@require_safe
def healthz(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"ok": True})


@never_cache
@require_safe
def readyz(request: HttpRequest) -> JsonResponse:
    failing = readiness_failing()
    return JsonResponse({"ready": not failing, "failing": failing}, status=503 if failing else 200)
