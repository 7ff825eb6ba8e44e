"""kill -9 during a global checkpoint round: during *prepare* and during *commit* the group is
left with a complete global checkpoint or none (never a partial one), and every participant
runs again to its end."""

from __future__ import annotations

import psycopg
import pytest
from django.db import connection

from checkpoints.models import Checkpoint
from multiagent.models import CheckpointRound, GlobalCheckpoint, RoundStatus
from tests.durable.conftest import TEST_CONFIG
from tests.multiagent.conftest import all_sleeping, delegate, group_spec, stepper

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def harness_config_text() -> str:
    return TEST_CONFIG + "multi_agent: {prepare_timeout_s: 60}\n"


def start_group(task_api, wait_for) -> tuple[str, list[str]]:
    parent = task_api.create(
        group_spec(
            {"calls": [delegate("left", "step"), delegate("right", "step")]},
            {"final": "reported"},
            agents={"left": stepper("left", 5), "right": stepper("right", 5)},
        )
    )
    children = wait_for(lambda: task_api.get(parent["id"])["children"], 30)

    wait_for(lambda: all_sleeping(children), 30, message="both children to sleep")
    return parent["id"], children


def request_cut(task_api, root_id: str) -> str:
    response = task_api.client.post(f"/api/v1/tasks/{root_id}/global-checkpoints", {})
    assert response.status_code == 202, response.content
    return response.json()["id"]


def assert_round_ends_complete_or_none(
    task_api, wait_for, root_id: str, round_id: str, children: list[str]
) -> None:
    """With workers back, the round ends with a complete global checkpoint or none, and the
    group runs to success."""
    wait_for(
        lambda: CheckpointRound.objects.get(id=round_id).status != RoundStatus.PREPARING,
        60,
        message="the round to end",
    )
    assert_complete_or_none(root_id, round_id)
    task_api.wait(root_id, "succeeded", timeout=90)
    for child in children:
        assert task_api.get(child)["status"] == "succeeded"


def assert_complete_or_none(root_id: str, round_id: str) -> None:
    round = CheckpointRound.objects.get(id=round_id)
    cuts = GlobalCheckpoint.objects.filter(round=round)
    if round.status == RoundStatus.ABORTED:
        assert not cuts.exists()
        return
    assert round.status == RoundStatus.COMMITTED
    cut = cuts.get()
    assert {p["task_id"] for p in cut.participants} == set(round.participants)
    for p in cut.participants:
        assert Checkpoint.objects.filter(id=p["checkpoint_id"], task_id=p["task_id"]).exists()


def kill_all(fleet) -> None:
    for process in fleet.pool.processes:
        if process.poll() is None:
            fleet.pool.kill(process)


def test_kill_9_during_prepare_leaves_a_complete_global_checkpoint_or_none(
    fleet, task_api, wait_for
):
    fleet.worker(2)
    fleet.sweeper()
    root_id, children = start_group(task_api, wait_for)
    round_id = request_cut(task_api, root_id)
    # Both children are in their sleep, so neither has prepared yet: their workers die now.
    kill_all(fleet)
    assert not GlobalCheckpoint.objects.filter(round_id=round_id).exists()
    fleet.worker(2)
    assert_round_ends_complete_or_none(task_api, wait_for, root_id, round_id, children)


def test_kill_9_during_commit_leaves_a_complete_global_checkpoint_or_none(
    fleet, task_api, wait_for
):
    fleet.worker(2)
    root_id, children = start_group(task_api, wait_for)
    # Another transaction holds global checkpoint seq 1 of this group, uncommitted: the commit
    # that the last participant to prepare runs blocks inside its transaction, after it wrote
    # its rows. Then every worker is killed.
    settings = connection.settings_dict
    blocker = psycopg.connect(
        host=settings["HOST"] or "127.0.0.1",
        port=settings["PORT"] or 5432,
        user=settings["USER"],
        dbname=settings["NAME"],
        autocommit=False,
    )
    try:
        with blocker.cursor() as cursor:
            cursor.execute(
                "INSERT INTO multiagent_checkpointround (id, root_id, trigger, status, "
                "participants, deadline, reason, created_at) VALUES (gen_random_uuid(), %s, "
                "'manual', 'aborted', '[]', now(), 'blocker', now()) RETURNING id",
                [root_id],
            )
            (blocker_round,) = cursor.fetchone()
            cursor.execute(
                "INSERT INTO multiagent_globalcheckpoint (id, root_id, seq, round_id, trigger, "
                "participants, superseded, created_at) VALUES (gen_random_uuid(), %s, 1, %s, "
                "'manual', '[]', false, now())",
                [root_id, blocker_round],
            )
        # Were the commit to run in this request (it should not: both children are busy),
        # it would wait for the blocker above, held by this very test: fail instead.
        with connection.cursor() as cursor:
            cursor.execute("SET lock_timeout = '20s'")
        round_id = request_cut(task_api, root_id)

        def commit_blocked() -> bool:
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                    "AND query ILIKE '%%multiagent_globalcheckpoint%%'"
                )
                return cursor.fetchone()[0] > 0

        wait_for(commit_blocked, 60, message="the commit to block mid-transaction")
        kill_all(fleet)
    finally:
        blocker.rollback()
        blocker.close()

    def no_backend_left() -> bool:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE query ILIKE "
                "'%%multiagent_globalcheckpoint%%' AND pid <> pg_backend_pid()"
            )
            return cursor.fetchone()[0] == 0

    wait_for(no_backend_left, 30, message="the killed commit's transaction to end")
    # The commit died with its worker: nothing of it remains.
    assert not GlobalCheckpoint.objects.filter(root_id=root_id).exists()
    assert CheckpointRound.objects.get(id=round_id).status == RoundStatus.PREPARING
    fleet.worker(2)
    fleet.sweeper()
    assert_round_ends_complete_or_none(task_api, wait_for, root_id, round_id, children)
