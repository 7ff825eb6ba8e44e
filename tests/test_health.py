"""`/readyz` as a load balancer sees it: ready while the database is migrated and Redis answers,
503 naming the part that is not (the database going away is tested against real processes in
tests/test_cli_production.py)."""

from __future__ import annotations

import pytest
from django.db import connection

from tests.conftest import free_port

pytestmark = pytest.mark.django_db


def test_readyz_is_ready_when_the_database_is_migrated_and_redis_answers(client):
    response = client.get("/readyz")
    assert response.status_code == 200
    assert response.json() == {"ready": True, "failing": []}


def test_readyz_names_redis_when_it_does_not_answer(client, settings):
    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json() == {"ready": False, "failing": ["redis"]}


@pytest.mark.django_db(transaction=True)
def test_readyz_names_migrations_when_one_is_not_applied(client):
    # The probe opens a connection of its own: the change must be committed to be seen.
    with connection.cursor() as cursor:
        cursor.execute(
            "DELETE FROM django_migrations WHERE id = (SELECT max(id) FROM django_migrations) "
            "RETURNING app, name, applied"
        )
        removed = cursor.fetchone()
    try:
        response = client.get("/readyz")
        assert response.status_code == 503
        assert response.json() == {"ready": False, "failing": ["migrations"]}
    finally:
        with connection.cursor() as cursor:
            cursor.execute(
                "INSERT INTO django_migrations (app, name, applied) VALUES (%s, %s, %s)", removed
            )
    assert client.get("/readyz").status_code == 200


def test_healthz_answers_without_touching_the_database(client, django_assert_num_queries):
    with django_assert_num_queries(0):
        response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"ok": True}
