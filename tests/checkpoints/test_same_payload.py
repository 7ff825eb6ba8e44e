"""A checkpoint taken before a write, in the same durable write as the model's turn and with
nothing changed since, is stored as that checkpoint's payload (checkpoints.payload: `b"S"` +
its id) instead of a second copy: it loads the same state, is verified against its own
checksum, and retention keeps the checkpoint it is stored as while it stays."""

from __future__ import annotations

import zlib

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from checkpoints.models import Checkpoint
from checkpoints.payload import checkpoint_raw, checkpoint_same_as
from checkpoints.retention import checkpoints_apply_retention
from checkpoints.services import CheckpointCorrupted, checkpoint_decode
from harness_base import config
from tests.checkpoints.conftest import NO_REVIEW_CONFIG, spec_dict

pytestmark = pytest.mark.django_db(transaction=True)


def _writes(n: int) -> dict:
    calls = [
        {"call": "write_file", "args": {"path": f"f{i}.txt", "content": f"same {i}"}}
        for i in range(n)
    ]
    return spec_dict(*calls, {"final": "done"}, tools=["write_file"])


def _pairs(task) -> list[tuple[Checkpoint, Checkpoint]]:
    """(after_model, before_write_operation) of each write step."""
    rows = {c.id: c for c in Checkpoint.objects.filter(task=task)}
    return [(rows[c.parent_id], c) for c in rows.values() if c.trigger == "before_write_operation"]


def test_the_checkpoint_before_a_write_is_stored_as_the_model_turns(
    make_task, run_inline, operator
):
    task = make_task(_writes(2), user=operator)
    assert run_inline(task) == "succeeded"

    pairs = _pairs(task)
    assert len(pairs) == 2
    for turn, before in pairs:
        assert turn.trigger == "after_model" and turn.step_index == before.step_index
        assert checkpoint_same_as(before.payload) == turn.id and len(before.payload) == 17
        assert before.checksum == turn.checksum
        assert checkpoint_decode(before).state == checkpoint_decode(turn).state


def test_a_tampered_source_makes_the_checkpoint_stored_as_it_corrupted(
    make_task, run_inline, operator
):
    task = make_task(_writes(1), user=operator)
    assert run_inline(task) == "succeeded"
    ((turn, before),) = _pairs(task)
    raw = checkpoint_raw(turn.payload).replace(b"same 0", b"evil 0")
    Checkpoint.objects.filter(id=turn.id).update(payload=zlib.compress(raw))

    with pytest.raises(CheckpointCorrupted):
        checkpoint_decode(Checkpoint.objects.get(id=before.id))


def test_retention_keeps_the_checkpoint_a_kept_one_is_stored_as(
    make_task, run_inline, operator, settings, tmp_path
):
    path = tmp_path / "retention.yaml"
    path.write_text(NO_REVIEW_CONFIG + "retention: {keep_last_per_task: 1, keep_levels: [task]}\n")
    settings.HARNESS_CONFIG_FILE = path
    config.harness_config.cache_clear()
    task = make_task(_writes(3), user=operator)
    assert run_inline(task) == "succeeded"
    last_turn, last_before = max(_pairs(task), key=lambda pair: pair[1].seq)

    assert checkpoints_apply_retention().checkpoints_deleted > 0

    left = {c.id: c for c in Checkpoint.objects.filter(task=task)}
    # The newest tool-level checkpoint stays, and so does the step-level one it is stored as,
    # though the keep rule alone would let that one go.
    assert last_before.id in left and last_turn.id in left
    assert all(checkpoint_decode(c).state.step_index >= 0 for c in left.values())


def test_the_checkpoint_list_verifies_them_without_a_query_each(
    make_task, run_inline, operator, viewer, api_client
):
    short, long = make_task(_writes(1), user=operator), make_task(_writes(4), user=operator)
    assert run_inline(short) == "succeeded" and run_inline(long) == "succeeded"
    client = api_client(viewer)

    client.get(f"/api/v1/tasks/{short.id}/checkpoints")  # the session's first request
    counts = []
    for task in (short, long):
        with CaptureQueriesContext(connection) as queries:
            rows = client.get(f"/api/v1/tasks/{task.id}/checkpoints").json()
        assert rows and all(row["checksum_ok"] for row in rows)
        counts.append(len(queries))
    assert counts[0] == counts[1]
