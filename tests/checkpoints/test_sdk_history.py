"""An SDK agent's message history is stored content-addressed, in chunks shared by its
checkpoints (checkpoints.history): what a step stores does not grow with the run; a resume, a
rollback and a checkpoint written before (the whole history inline) give back exactly the
checkpoint's history; garbage collection keeps the chunks a checkpoint names. Pydantic AI
tasks run by the RQ job function in this process."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
import time_machine
from django.db.models import Sum
from django.db.models.functions import Length
from django.utils import timezone

from agent.jobs import run_task
from checkpoints.blobstore import blob_store
from checkpoints.history import (
    MARK,
    HistoryChunks,
    history_chunk_keys,
    history_expand,
    history_expand_state,
    history_heads,
)
from checkpoints.models import Blob, Checkpoint
from checkpoints.recovery import checkpoint_rollback
from checkpoints.retention import BLOB_GRACE_S, blobs_collect_garbage
from checkpoints.services import checkpoint_decode, checkpoint_encode
from review.models import ReviewRequest
from tasks.models import Task

pytestmark = pytest.mark.django_db(transaction=True)

CONFIG = """
pydantic_ai_agents:
  history: "tests.checkpoints.sdk_history_agents:history_agent"
openai_agents:
  writer: "tests.durable.openai_agents:writer"
"""


@pytest.fixture(autouse=True)
def _config(harness_yaml, harness_dirs) -> None:
    harness_yaml(CONFIG)


def _task(task_api: Any, steps: int, *, gated: bool = False, tag: str = "t") -> Any:
    job = json.dumps({"steps": steps, "gated": gated, "tag": tag})
    created = task_api.create(
        {
            "title": f"history {steps}",
            "goal": "take notes",
            "agent": {"kind": "pydantic-ai", "name": "history", "input": job},
            "budget": {"max_steps": steps + 5, "max_tokens": 10**12},
        }
    )
    return created["id"]


def _history(checkpoint: Checkpoint) -> list[Any]:
    return list(history_expand(checkpoint_decode(checkpoint).state.sdk["messages"]))


def _chunks_named(task_id: Any) -> set[str]:
    return history_chunk_keys(
        [
            head
            for checkpoint in Checkpoint.objects.filter(task_id=task_id)
            for head in history_heads(checkpoint_decode(checkpoint).state.sdk)
        ]
    )


def _stored(task_id: Any) -> tuple[float, int]:
    """(bytes stored per step: checkpoint payloads + the history chunks they name, the largest
    checkpoint payload)."""
    rows = Checkpoint.objects.filter(task_id=task_id)
    payloads = sum(len(c.payload) for c in rows)
    named = Blob.objects.filter(sha256__in=_chunks_named(task_id))
    chunks = named.aggregate(n=Sum(Length("data")))["n"] or 0
    steps = Task.objects.get(id=task_id).steps_used
    return (payloads + chunks) / steps, max(len(c.payload) for c in rows)


def test_stored_bytes_per_step_do_not_grow_with_the_run(task_api):
    short, long = _task(task_api, 50), _task(task_api, 200)
    assert run_task(short) == "succeeded" and run_task(long) == "succeeded"
    assert task_api.get(long)["result"] == "done 200 200 True t"

    per_step_short, largest_short = _stored(short)
    per_step_long, largest_long = _stored(long)
    # Stored per step at 200 steps within 10% of 50 steps (it was twice as much: the whole
    # history in every checkpoint), and no checkpoint row grows with the run.
    assert per_step_long <= per_step_short * 1.1, (per_step_short, per_step_long)
    assert largest_long <= largest_short * 1.1, (largest_short, largest_long)
    head = Task.objects.get(id=long).head_checkpoint
    assert MARK in checkpoint_decode(head).state.sdk["messages"]
    assert len(_history(head)) == 1 + 2 * 200 + 1


@pytest.mark.parametrize("inline", [False, True], ids=["chunks", "written-inline-before"])
def test_a_paused_run_resumes_with_its_whole_history(task_api, api_client, operator, inline):
    task_id = _task(task_api, 40, gated=True, tag="gated")
    assert run_task(task_id) == "paused"
    head = Task.objects.get(id=task_id).head_checkpoint
    history = _history(head)
    assert len(history) == 1 + 2 * 40 + 1
    if inline:  # as a checkpoint written before the chunks: the whole history in it
        state = checkpoint_decode(head).state
        state.sdk = {**state.sdk, "messages": history}
        head.payload, head.checksum, head.size_bytes = checkpoint_encode(
            state=state, snapshot=checkpoint_decode(head).snapshot
        )
        head.save(update_fields=["payload", "checksum", "size_bytes"])
        assert checkpoint_decode(head).state.sdk["messages"] == history

    review = ReviewRequest.objects.get(task_id=task_id)
    assert api_client(operator).decide(review.id, decision="approve").status_code == 200
    assert run_task(task_id) == "succeeded"
    assert task_api.get(task_id)["result"] == "done 41 40 True gated"


def test_a_rollback_restores_exactly_that_checkpoints_history(task_api, operator):
    task_id = _task(task_api, 40, tag="rolled")
    assert run_task(task_id) == "succeeded"
    target = Checkpoint.objects.get(task_id=task_id, trigger="after_step", step_index=25)
    expected = _history(target)
    assert len(expected) == 1 + 2 * 25

    checkpoint_rollback(
        task_id=task_id, checkpoint_id=target.id, user=operator, reason="again", resume=False
    )
    head = Task.objects.get(id=task_id).head_checkpoint
    assert head.id != target.id and _history(head) == expected
    checkpoint_rollback(
        task_id=task_id, checkpoint_id=head.id, user=operator, reason="go on", resume=True
    )
    assert run_task(task_id) == "succeeded"
    # The model went on from turn 25 with those 25 notes: 40 notes in order, none twice.
    assert task_api.get(task_id)["result"] == "done 40 40 True rolled"


def test_garbage_collection_keeps_the_chunks_a_checkpoint_names(task_api, api_client, operator):
    task_id = _task(task_api, 40, gated=True, tag="kept")
    assert run_task(task_id) == "paused"
    named = _chunks_named(task_id)
    assert len(named) >= 5

    with time_machine.travel(timezone.now() + timedelta(seconds=BLOB_GRACE_S + 60)):
        blobs_collect_garbage(orphans_after=None)

    assert named <= set(Blob.objects.values_list("sha256", flat=True))
    review = ReviewRequest.objects.get(task_id=task_id)
    assert api_client(operator).decide(review.id, decision="approve").status_code == 200
    assert run_task(task_id) == "succeeded"
    assert task_api.get(task_id)["result"] == "done 41 40 True kept"


def test_a_json_state_whose_dicts_grow_with_sorted_keys_stores_flat_and_reads_back_whole():
    """The OpenAI Agents SDK's RunState keeps an entry per tool call in dicts (approvals, tool
    invocations) serialized with sorted keys: a new call's entry lands among the old ones, yet
    what each checkpoint stores stays flat, and every checkpoint reads back whole."""
    writer = HistoryChunks()
    stored: list[int] = []
    for step in range(1, 201):
        calls = sorted(f"call_t{i}_0" for i in range(step))
        state = {
            "context": {
                "tool_invocations": {c: {"completed": True, "scope": "ab" * 16} for c in calls}
            },
            "tool_use_tracker": {"bench": ["noop"] * step},
            "current_turn": step,
        }
        kept = writer.compact_json("run_state", json.dumps(state, sort_keys=True))
        chunks = writer.take_chunks()
        blob_store().put_many(chunks)
        stored.append(len(json.dumps(kept)) + sum(len(body) for body in chunks.values()))
        if step % 40 == 0:
            assert json.loads(history_expand(kept, name="run_state")) == state
    assert sum(stored[150:200]) <= sum(stored[50:100]) * 1.1, (stored[50:100], stored[150:200])


def test_an_openai_checkpoint_written_with_the_run_state_as_text_still_resumes(
    task_api, api_client, operator, quiet_watchdog
):
    """Before, the RunState was stored as its JSON text (to_string): such a head resumes."""
    created = task_api.create(
        {"title": "writer", "goal": "write", "agent": {"kind": "openai-agents", "name": "writer"}}
    )
    task_id = created["id"]
    assert run_task(task_id) == "paused"
    head = Task.objects.get(id=task_id).head_checkpoint
    loaded = checkpoint_decode(head)
    sdk = history_expand_state(loaded.state.sdk)
    assert isinstance(sdk["run_state"], dict)
    loaded.state.sdk = {**sdk, "run_state": json.dumps(sdk["run_state"], indent=2)}
    head.payload, head.checksum, head.size_bytes = checkpoint_encode(
        state=loaded.state, snapshot=loaded.snapshot
    )
    head.save(update_fields=["payload", "checksum", "size_bytes"])

    review = ReviewRequest.objects.get(task_id=task_id)
    assert api_client(operator).decide(review.id, decision="approve").status_code == 200
    assert run_task(task_id) == "succeeded"
    assert task_api.get(task_id)["result"] == "done: published 1.0"
