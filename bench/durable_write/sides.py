"""The sides measured: ours (a checkpoint per step), LangGraph's savers (through one driver),
and the floor (a bare INSERT of the same bytes)."""

from __future__ import annotations

import json
import uuid
from typing import Any

from bench.common import (
    reference_conninfo,
    scripted_task,
    tasks_delete,
)
from bench.durable_write.inputs import agent_state, chat_text, langchain_messages


class Ours:
    """A Run (agent.runtime.run) holding the lease of a running task; each call commits one step."""

    def __init__(self) -> None:
        from agent.runtime.run import Run, worker_identity
        from tasks.services import task_acquire

        task = scripted_task(script=[{"final": "done"}], tools=[], title="bench durable_write")
        self.task_id = task.id
        worker = worker_identity()
        self.run = Run(task_acquire(task_id=task.id, worker_id=worker), worker)
        self.run.state = agent_state()
        self.run.workspace.mkdir(parents=True, exist_ok=True)

    def step(self) -> None:
        run = self.run
        run.state.step_index += 1
        run.state.budget.steps += 1
        run.event("step_finished", {"step": run.state.step_index})
        run.commit(trigger="after_step")

    def stored_bytes(self) -> bytes:
        """What one step stores: the checkpoint payload (compressed against the run's current
        base, as its next step's is) and the event payload."""
        from checkpoints.payload import CheckpointCodec
        from checkpoints.services import checkpoint_build

        run = self.run
        codec = CheckpointCodec()
        codec.base = run.codec.base
        payload = checkpoint_build(
            task_id=run.task_id,
            seq=0,
            state=run.state,
            level="step",
            trigger="after_step",
            codec=codec,
        ).payload
        event = json.dumps({"step": run.state.step_index}).encode()
        return bytes(payload) + event

    def close(self) -> None:
        self.run.watchdog.finish()
        tasks_delete([self.task_id])


class SaverDriver:
    """A LangGraph checkpoint saver driven as LangGraph's loop drives it: each step a put of
    the agent state's messages, then put_writes of a tool message against it."""

    def __init__(self, saver: Any, state: Any) -> None:
        from langchain_core.messages import ToolMessage

        self.saver = saver
        self.messages = langchain_messages(state)
        self.write = ToolMessage(content=chat_text(999), tool_call_id="0.99.0", name="read_file")
        self.config: dict[str, Any] = {
            "configurable": {"thread_id": f"bench-{uuid.uuid4()}", "checkpoint_ns": ""}
        }
        self.version: str | None = None
        self.step_index = 0

    def put(self) -> None:
        from langgraph.checkpoint.base import empty_checkpoint

        self.step_index += 1
        self.version = self.saver.get_next_version(self.version, None)
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = {"messages": self.messages}
        checkpoint["channel_versions"] = {"messages": self.version}
        self.config = self.saver.put(
            self.config,
            checkpoint,
            {"source": "loop", "step": self.step_index, "parents": {}},
            {"messages": self.version},
        )

    def put_writes(self) -> None:
        self.saver.put_writes(self.config, [("messages", [self.write])], task_id=str(uuid.uuid4()))

    def step(self) -> None:
        self.put()
        self.put_writes()


class LangGraph(SaverDriver):
    """PostgresSaver on the connection PostgresSaver.from_conn_string opens."""

    def __init__(self, state: Any) -> None:
        import psycopg
        from langgraph.checkpoint.postgres import PostgresSaver
        from psycopg.rows import dict_row

        self.conn = psycopg.connect(
            reference_conninfo(), autocommit=True, prepare_threshold=0, row_factory=dict_row
        )
        saver = PostgresSaver(self.conn)
        saver.setup()
        super().__init__(saver, state)

    def close(self) -> None:
        self.conn.close()


class Floor:
    def __init__(self, data: bytes) -> None:
        import psycopg

        self.data = data
        self.conn = psycopg.connect(reference_conninfo())
        self.conn.execute(
            "CREATE TABLE floor_write (id bigserial PRIMARY KEY, data bytea NOT NULL)"
        )
        self.conn.commit()

    def step(self) -> None:
        self.conn.execute("INSERT INTO floor_write (data) VALUES (%s)", (self.data,))
        self.conn.commit()

    def close(self) -> None:
        self.conn.close()
