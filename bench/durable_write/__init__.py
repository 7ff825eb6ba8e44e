"""(1) Durable write per step.

Ours: one `Run.commit(trigger="after_step")` (agent.runtime.run) through the real code —
AgentState encoded by `checkpoints.services.checkpoint_build` (canonical JSON, zlib against the
run's payload base, sha256),
then in one transaction the lease-fenced task UPDATE, the checkpoint INSERT and the step's
events bulk INSERT — for an AgentState with 20 chat messages of ~500 characters.

Reference: LangGraph's `PostgresSaver.put` + `put_writes` for the same 20 messages (as
LangChain messages, its own serialisation) plus the step's tool message as a pending write.

DBOS: one `@DBOS.step` of a running DBOS workflow (DBOS Transact) whose output is the bytes
ours stores per step (bench/durable_write/dbos_side.py), timed inside the workflow.

Floor: a raw psycopg INSERT of the bytes ours stores (compressed checkpoint payload + event
JSON) into a bare table, then commit.

All four run interleaved on the same PostgreSQL, each with its own connection.

Expected run time (quiet 2-CPU machine): smoke ~5 s; full ~20 s (550 interleaved rounds of
three contenders, then a profile of 300 commits).
"""

from __future__ import annotations

from typing import Any

from bench.common import (
    figure,
    profile_top,
    reference_schema_reset,
    sample_interleaved,
    stats,
)
from bench.common.dbos_ref import dbos_stop
from bench.durable_write.dbos_side import Dbos
from bench.durable_write.inputs import MESSAGE_CHARS, MESSAGES, agent_state, chat_text
from bench.durable_write.sides import Floor, LangGraph, Ours, SaverDriver

TITLE = "Durable write per step"


SIZES = {
    "smoke": {"n": 3, "warmup": 1, "profile": 2},
    "full": {"n": 500, "warmup": 50, "profile": 300},
}


def run(size: str) -> dict[str, Any]:
    params = SIZES[size]
    reference_schema_reset()
    ours = Ours()
    langgraph = LangGraph(ours.run.state)
    ours.step()  # the run's first checkpoint starts its payload base
    floor = Floor(ours.stored_bytes())
    dbos = Dbos(ours.stored_bytes())
    try:
        samples = sample_interleaved(
            {
                "ours": ours.step,
                "langgraph": langgraph.step,
                "floor": floor.step,
                "dbos": dbos.step,
            },
            n=params["n"],
            warmup=params["warmup"],
        )
        samples["dbos"] = dbos.samples(params["n"])
        profile = profile_top(ours.step, repeat=params["profile"])
        stored = len(ours.stored_bytes())
        dbos_stored = dbos.stored_bytes_per_step()
    finally:
        ours.close()
        langgraph.close()
        floor.close()
        dbos.close()
        dbos_stop()
        reference_schema_reset(drop_only=True)
    ms = {name: stats(values, scale=1000) for name, values in samples.items()}
    floor_ratio = ms["ours"]["median"] / ms["floor"]["median"]
    langgraph_ratio = ms["ours"]["median"] / ms["langgraph"]["median"]
    dbos_ratio = ms["ours"]["median"] / ms["dbos"]["median"]
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
                others=[("DBOS", ms["dbos"])],
            ),
            figure(
                figure="Durable write per step vs LangGraph",
                unit="ms",
                ours=ms["ours"],
                reference=ms["langgraph"],
                reference_label="PostgresSaver put + put_writes",
                target="≤ 0.9× LangGraph, ≤ 1.0× DBOS",
                met=langgraph_ratio <= 0.9 and dbos_ratio <= 1.0,
                others=[("DBOS", ms["dbos"])],
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
            "bytes_per_step_dbos": dbos_stored,
        },
        "notes": (
            f"State: {MESSAGES} chat messages of ~{MESSAGE_CHARS} characters. Ours = one "
            '`Run.commit(trigger="after_step")` (checkpoint_build + fenced task UPDATE + '
            "checkpoint INSERT + events bulk INSERT, one statement; the payload compressed "
            "against the run's base, an earlier checkpoint of the run); LangGraph = "
            "`PostgresSaver.put` (messages channel blob + checkpoint row) + `put_writes` (the "
            "step's tool message); DBOS = one `@DBOS.step` of an open DBOS workflow returning the "
            "same bytes (its output row in `operation_outputs`, "
            f"{dbos_stored:,.0f} bytes a row), timed inside the workflow; floor = raw "
            "psycopg `INSERT` of the "
            f"{stored:,} bytes ours stores per step, then `commit()`. Interleaved round-robin."
        ),
    }


__all__ = [
    "SIZES",
    "SaverDriver",
    "TITLE",
    "agent_state",
    "chat_text",
    "run",
]
