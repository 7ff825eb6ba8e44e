"""(1) Durable write per step.

Ours: one `Run.commit(trigger="after_step")` (agent.runtime.run) through the real code —
AgentState encoded by `checkpoints.services.checkpoint_build` (canonical JSON, zlib against the
run's payload base, sha256),
then in one transaction the lease-fenced task UPDATE, the checkpoint INSERT and the step's
events bulk INSERT — for an AgentState with 20 chat messages of ~500 characters.

Reference: LangGraph's `PostgresSaver.put` + `put_writes` for the same 20 messages (as
LangChain messages, its own serialisation) plus the step's tool message as a pending write.

Floor: a raw psycopg INSERT of the bytes ours stores (compressed checkpoint payload + event
JSON) into a bare table, then commit.

All three run interleaved on the same PostgreSQL, each with its own connection.

Expected run time (quiet 2-CPU machine): smoke ~5 s; full ~20 s (550 interleaved rounds of
three contenders, then a profile of 300 commits).
"""

from __future__ import annotations

import functools
import json
import uuid
from pathlib import Path
from typing import Any

from bench.common import (
    figure,
    profile_top,
    reference_conninfo,
    reference_schema_reset,
    sample_interleaved,
    scripted_task,
    stats,
    tasks_delete,
)

TITLE = "Durable write per step"
MESSAGES = 20
MESSAGE_CHARS = 500
SIZES = {
    "smoke": {"n": 3, "warmup": 1, "profile": 2},
    "full": {"n": 500, "warmup": 50, "profile": 300},
}

# Real prose, which compresses about as chat does (~2x), unlike a small vocabulary of repeated
# words (4.4x): the project's documentation as it was at 0aba9ae, whitespace folded, frozen in
# bench/corpus.txt. Frozen, so that the text the benchmarks store is the same in every commit:
# read from the living docs, the README's growing benchmark table made a write step's stored
# bytes 24 % larger and compression slower with no code change.
_CORPUS = Path(__file__).resolve().parent / "corpus.txt"


@functools.cache
def _corpus() -> str:
    return _CORPUS.read_text(encoding="utf-8")


def chat_text(seed: int, chars: int = MESSAGE_CHARS) -> str:
    """`chars` characters of the frozen corpus, from a place chosen by `seed`."""
    corpus = _corpus()
    start = (seed * 7919) % (len(corpus) - chars)
    return corpus[start : start + chars]


def agent_state() -> Any:
    """20 messages: system, user, then assistant tool calls and tool results in turn."""
    from tasks.agent_state import AgentState, Message, ProposedCall

    messages = [
        Message(role="system", content=chat_text(0)),
        Message(role="user", content=chat_text(1)),
    ]
    turn = 0
    while len(messages) < MESSAGES:
        call_id = f"0.{turn}.0"
        messages.append(
            Message(
                role="assistant",
                content=chat_text(2 + 2 * turn),
                calls=[
                    ProposedCall(
                        call_id=call_id, tool="read_file", args={"path": f"notes/{turn}.txt"}
                    )
                ],
            )
        )
        messages.append(
            Message(role="tool", content=chat_text(3 + 2 * turn), call_id=call_id, name="read_file")
        )
        turn += 1
    return AgentState(messages=messages[:MESSAGES], turn_index=turn, step_index=turn)


def langchain_messages(state: Any) -> list[Any]:
    """The same conversation as LangChain messages (what LangGraph's state would hold)."""
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    out: list[Any] = []
    for m in state.messages:
        if m.role == "system":
            out.append(SystemMessage(content=m.content))
        elif m.role == "user":
            out.append(HumanMessage(content=m.content))
        elif m.role == "assistant":
            out.append(
                AIMessage(
                    content=m.content,
                    tool_calls=[
                        {"name": c.tool, "args": c.args, "id": c.call_id} for c in m.calls or []
                    ],
                )
            )
        else:
            out.append(ToolMessage(content=m.content, tool_call_id=m.call_id, name=m.name))
    return out


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
        from checkpoints.services import CheckpointCodec, checkpoint_build

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


def run(size: str) -> dict[str, Any]:
    params = SIZES[size]
    reference_schema_reset()
    ours = Ours()
    langgraph = LangGraph(ours.run.state)
    ours.step()  # the run's first checkpoint starts its payload base
    floor = Floor(ours.stored_bytes())
    try:
        samples = sample_interleaved(
            {"ours": ours.step, "langgraph": langgraph.step, "floor": floor.step},
            n=params["n"],
            warmup=params["warmup"],
        )
        profile = profile_top(ours.step, repeat=params["profile"])
        stored = len(ours.stored_bytes())
    finally:
        ours.close()
        langgraph.close()
        floor.close()
        reference_schema_reset(drop_only=True)
    ms = {name: stats(values, scale=1000) for name, values in samples.items()}
    floor_ratio = ms["ours"]["median"] / ms["floor"]["median"]
    langgraph_ratio = ms["ours"]["median"] / ms["langgraph"]["median"]
    return {
        "title": TITLE,
        "figures": [
            figure(
                figure="Durable write per step vs the floor",
                unit="ms",
                ours=ms["ours"],
                reference=ms["floor"],
                reference_label="raw INSERT + commit",
                target="≤ 2.0× floor",
                met=floor_ratio <= 2.0,
            ),
            figure(
                figure="Durable write per step vs LangGraph",
                unit="ms",
                ours=ms["ours"],
                reference=ms["langgraph"],
                reference_label="PostgresSaver put + put_writes",
                target="≤ 0.9× LangGraph",
                met=langgraph_ratio <= 0.9,
            ),
            figure(
                figure="Durable write per step, absolute",
                unit="ms",
                ours=ms["ours"],
                target="≤ ~1 ms",
                met=ms["ours"]["median"] <= 1.0,
            ),
        ],
        "profiles": {"ours: one Run.commit(after_step)": profile},
        "details": {
            "messages": MESSAGES,
            "message_chars": MESSAGE_CHARS,
            "bytes_per_step_ours": stored,
        },
        "notes": (
            f"State: {MESSAGES} chat messages of ~{MESSAGE_CHARS} characters. Ours = one "
            '`Run.commit(trigger="after_step")` (checkpoint_build + fenced task UPDATE + '
            "checkpoint INSERT + events bulk INSERT, one statement; the payload compressed "
            "against the run's base, an earlier checkpoint of the run); LangGraph = "
            "`PostgresSaver.put` (messages channel blob + checkpoint row) + `put_writes` (the "
            "step's tool message); floor = raw psycopg `INSERT` of the "
            f"{stored:,} bytes ours stores per step, then `commit()`. Interleaved round-robin."
        ),
    }
