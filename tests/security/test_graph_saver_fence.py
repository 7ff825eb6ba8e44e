"""A LangGraph run that lost its task's lease cannot write a super-step late: the saver bound
to the run's lease epoch refuses every put / put_writes of a stale epoch (LeaseLost) and stores
nothing, while the run holding the lease writes as usual."""

from __future__ import annotations

import asyncio
from typing import TypedDict

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.graph import END, START, StateGraph

from checkpoints.langgraph import DjangoCheckpointSaver
from checkpoints.models import GraphBlob, GraphCheckpoint, GraphWrite
from tasks.models import Task
from tasks.services import task_acquire, task_transition
from tasks.states import LeaseLost
from tests.factories import graph_spec, spec_task

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def taken_over() -> tuple[Task, int, int]:
    """A graph task whose first worker lost its lease to a second: (task, stale epoch, live
    epoch)."""
    task = spec_task(graph_spec("release_bot"))
    task_transition(task_id=task.id, to="queued")
    stale = task_acquire(task_id=task.id, worker_id="w1").lease_epoch
    task_transition(task_id=task.id, to="stalled", reason="heartbeat lost")
    task_transition(task_id=task.id, to="queued", reason="redispatch")
    live = task_acquire(task_id=task.id, worker_id="w2").lease_epoch
    assert live > stale
    return task, stale, live


def config(task: Task, checkpoint_id: str | None = None) -> dict:
    configurable = {"thread_id": str(task.id), "checkpoint_ns": ""}
    if checkpoint_id:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}


def checkpoint_with_a_blob() -> dict:
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"notes": ["late", "write"], "n": 3}
    checkpoint["channel_versions"] = {"notes": "1", "n": "1"}
    return checkpoint


def stored(task: Task) -> tuple[int, int, int]:
    thread = str(task.id)
    return (
        GraphCheckpoint.objects.filter(thread_id=thread).count(),
        GraphBlob.objects.filter(thread_id=thread).count(),
        GraphWrite.objects.filter(thread_id=thread).count(),
    )


def test_a_stale_epoch_put_is_refused_and_nothing_is_stored(taken_over):
    task, stale, _live = taken_over
    saver = DjangoCheckpointSaver(task_id=task.id, epoch=stale)
    checkpoint = checkpoint_with_a_blob()

    with pytest.raises(LeaseLost):
        saver.put(config(task), checkpoint, {"source": "loop", "step": 1}, {"notes": "1"})
    with pytest.raises(LeaseLost):
        saver.put_writes(config(task, checkpoint["id"]), [("notes", ["x"])], "node-1")
    with pytest.raises(LeaseLost):
        asyncio.run(
            saver.aput(config(task), checkpoint, {"source": "loop", "step": 1}, {"notes": "1"})
        )
    with pytest.raises(LeaseLost):
        asyncio.run(saver.aput_writes(config(task, checkpoint["id"]), [("n", 4)], "node-1"))
    saver.close()

    assert stored(task) == (0, 0, 0)
    assert saver.get_tuple(config(task)) is None


def test_the_live_epoch_writes_and_a_stale_one_cannot_overwrite_it(taken_over):
    task, stale, live = taken_over
    checkpoint = checkpoint_with_a_blob()
    with DjangoCheckpointSaver(task_id=task.id, epoch=live) as saver:
        saved = saver.put(config(task), checkpoint, {"source": "loop", "step": 1}, {"notes": "1"})
        saver.put_writes(saved, [("notes", ["live"])], "node-1")
    assert stored(task) == (1, 1, 1)

    forged = {**checkpoint, "channel_values": {"notes": ["forged"], "n": 0}}
    with DjangoCheckpointSaver(task_id=task.id, epoch=stale) as saver:
        with pytest.raises(LeaseLost):
            saver.put(config(task), forged, {"source": "loop", "step": 9}, {"notes": "2"})
        with pytest.raises(LeaseLost):
            saver.put_writes(saved, [("__error__", "forged")], "node-1")
        latest = saver.get_tuple(config(task))
    assert latest.checkpoint["channel_values"]["notes"] == ["late", "write"]
    assert [w[1:] for w in latest.pending_writes] == [("notes", ["live"])]
    assert stored(task) == (1, 1, 1)


class State(TypedDict, total=False):
    n: int


def test_a_graph_run_by_a_stale_worker_stops_at_its_first_write(taken_over):
    task, stale, _live = taken_over
    ran: list[int] = []

    def step(state: State) -> dict:
        ran.append(state.get("n", 0))
        return {"n": state.get("n", 0) + 1}

    builder = StateGraph(State)
    builder.add_node("step", step)
    builder.add_edge(START, "step")
    builder.add_edge("step", END)
    with DjangoCheckpointSaver(task_id=task.id, epoch=stale) as saver:
        graph = builder.compile(checkpointer=saver)
        with pytest.raises(LeaseLost):
            graph.invoke({"n": 1}, config(task), durability="sync")
    # The input checkpoint's save runs in the background: the first node may have run
    # meanwhile, but none of its writes, nor any checkpoint, is stored; the run went no further.
    assert len(ran) <= 1
    assert stored(task) == (0, 0, 0)


def test_an_unbound_saver_is_not_fenced(taken_over):
    """Users' own graphs (and the operator's rollback) use the saver without a lease."""
    task, _stale, _live = taken_over
    with DjangoCheckpointSaver() as saver:
        saver.put(config(task), checkpoint_with_a_blob(), {"source": "input", "step": -1}, {})
    assert stored(task)[0] == 1
    with pytest.raises(ValueError):
        DjangoCheckpointSaver(epoch=1)
