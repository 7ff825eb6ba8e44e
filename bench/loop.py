"""(2) Loop overhead end to end: steps per second in one worker process.

Ours: `tasks.runtime.task_run` in-process against PostgreSQL (acquisition to `succeeded`),
the scripted model proposing one `noop` call per turn, then a final answer.

Reference: LangGraph's prebuilt ReAct agent (`langgraph.prebuilt.create_react_agent`) with a
zero-latency fake chat model emitting the same tool calls, the same no-op tool and
`PostgresSaver` on the same PostgreSQL (LangGraph's default durability, "async", and "sync"
for comparison).

Stored bytes per step: the rows a run leaves behind (pg_column_size of whole rows) — ours:
checkpoints + events + tool calls; LangGraph: checkpoints + checkpoint_blobs +
checkpoint_writes of the thread — divided by the number of steps.
"""

from __future__ import annotations

import uuid
import warnings
from typing import Any

from bench.common import (
    figure,
    profile_top,
    rate_stats,
    reference_conninfo,
    reference_schema_reset,
    scripted_task,
    stats,
    tasks_delete,
    timed,
)

TITLE = "Loop overhead end to end"
SIZES = {"smoke": {"steps": (3, 6), "repeat": 2}, "full": {"steps": (50, 200), "repeat": 7}}


# --- ours -------------------------------------------------------------------------------------


def ours_prepare(steps: int) -> Any:
    return scripted_task(
        script=[{"call": "noop", "args": {}}] * steps + [{"final": "done"}],
        tools=["noop"],
        title=f"bench loop {steps}",
        max_steps=steps + 1,
    )


def ours_run(task: Any) -> None:
    from tasks.runtime import task_run

    outcome = task_run(task_id=task.id)
    if outcome != "succeeded":
        raise RuntimeError(f"benchmark task {task.id} ended {outcome}")


def ours_stored_bytes(task_id: Any) -> int:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT (SELECT coalesce(sum(pg_column_size(c.*)), 0) FROM checkpoints_checkpoint c"
            "        WHERE c.task_id = %(t)s)"
            "     + (SELECT coalesce(sum(pg_column_size(e.*)), 0) FROM tasks_taskevent e"
            "        WHERE e.task_id = %(t)s)"
            "     + (SELECT coalesce(sum(pg_column_size(k.*)), 0) FROM tasks_toolcall k"
            "        WHERE k.task_id = %(t)s)",
            {"t": task_id},
        )
        return int(cursor.fetchone()[0])


def ours_checkpoint_growth(task_id: Any, *, per: int = 50) -> list[int]:
    """Average stored bytes of a checkpoint row per `per` steps: whether state is bounded."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT step_index / %s, avg(pg_column_size(c.*))::int FROM checkpoints_checkpoint c"
            " WHERE c.task_id = %s GROUP BY 1 ORDER BY 1",
            [per, task_id],
        )
        return [size for _, size in cursor.fetchall()]


def ours_samples(steps: int, repeat: int) -> tuple[list[float], list[float]]:
    """(seconds per run, stored bytes per step per run)."""
    seconds, per_step = [], []
    for _ in range(repeat):
        task = ours_prepare(steps)
        seconds.append(timed(lambda task=task: ours_run(task)))
        per_step.append(ours_stored_bytes(task.id) / steps)
        tasks_delete([task.id])
    return seconds, per_step


# --- LangGraph --------------------------------------------------------------------------------


def fake_model(steps: int) -> Any:
    """A chat model that calls `noop` until it has made `steps` calls, then answers."""
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.messages import AIMessage
    from langchain_core.outputs import ChatGeneration, ChatResult

    class FakeToolCaller(BaseChatModel):
        steps: int

        @property
        def _llm_type(self) -> str:
            return "fake-tool-caller"

        def _generate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
            done = sum(isinstance(m, AIMessage) for m in messages)
            if done < self.steps:
                message = AIMessage(
                    content="", tool_calls=[{"name": "noop", "args": {}, "id": f"call_{done}"}]
                )
            else:
                message = AIMessage(content="done")
            return ChatResult(generations=[ChatGeneration(message=message)])

        def bind_tools(self, tools, **kwargs):
            return self

    return FakeToolCaller(steps=steps)


def noop_tool() -> Any:
    from langchain_core.tools import tool

    @tool
    def noop() -> dict:
        """Do nothing (for benchmarks of the loop's own overhead)."""
        return {"ok": True}

    return noop


class LangGraphAgent:
    def __init__(self) -> None:
        import psycopg
        from langgraph.checkpoint.postgres import PostgresSaver
        from psycopg.rows import dict_row

        # The connection PostgresSaver.from_conn_string opens.
        self.conn = psycopg.connect(
            reference_conninfo(), autocommit=True, prepare_threshold=0, row_factory=dict_row
        )
        self.saver = PostgresSaver(self.conn)
        self.saver.setup()
        self.agents: dict[int, Any] = {}

    def agent(self, steps: int) -> Any:
        if steps not in self.agents:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # create_react_agent is deprecated in 1.x
                from langgraph.prebuilt import create_react_agent

                self.agents[steps] = create_react_agent(
                    fake_model(steps), [noop_tool()], checkpointer=self.saver
                )
        return self.agents[steps]

    def run(self, steps: int, *, durability: str, thread_id: str) -> None:
        from langchain_core.messages import HumanMessage, ToolMessage

        out = self.agent(steps).invoke(
            {"messages": [HumanMessage(content="benchmark")]},
            {"configurable": {"thread_id": thread_id}, "recursion_limit": 2 * steps + 10},
            durability=durability,
        )
        tool_messages = sum(isinstance(m, ToolMessage) for m in out["messages"])
        if tool_messages != steps or out["messages"][-1].content != "done":
            raise RuntimeError(f"LangGraph run made {tool_messages} tool calls, not {steps}")

    def stored_bytes(self, thread_id: str) -> int:
        row = self.conn.execute(
            "SELECT (SELECT coalesce(sum(pg_column_size(c.*)), 0) FROM checkpoints c"
            "        WHERE c.thread_id = %(t)s)"
            "     + (SELECT coalesce(sum(pg_column_size(b.*)), 0) FROM checkpoint_blobs b"
            "        WHERE b.thread_id = %(t)s)"
            "     + (SELECT coalesce(sum(pg_column_size(w.*)), 0) FROM checkpoint_writes w"
            "        WHERE w.thread_id = %(t)s) AS total",
            {"t": thread_id},
        ).fetchone()
        return int(row["total"])

    def samples(
        self, steps: int, repeat: int, *, durability: str
    ) -> tuple[list[float], list[float]]:
        seconds, per_step = [], []
        for _ in range(repeat):
            thread_id = str(uuid.uuid4())
            seconds.append(
                timed(lambda t=thread_id: self.run(steps, durability=durability, thread_id=t))
            )
            per_step.append(self.stored_bytes(thread_id) / steps)
            self.saver.delete_thread(thread_id)
        return seconds, per_step

    def close(self) -> None:
        self.conn.close()


# --- the benchmark ----------------------------------------------------------------------------


def run(size: str) -> dict[str, Any]:
    params = SIZES[size]
    small, large = params["steps"]
    repeat = params["repeat"]
    reference_schema_reset()
    langgraph = LangGraphAgent()
    seconds: dict[tuple[str, int], list[float]] = {}
    stored: dict[tuple[str, int], list[float]] = {}
    try:
        # Warm both paths up (imports, prepared plans) before measuring.
        ours_samples(3, 1)
        langgraph.samples(3, 1, durability="async")
        # Alternate ours / LangGraph per repetition so a busy moment hits both.
        for _ in range(repeat):
            for steps in (small, large):
                for who, sampler in (
                    ("ours", lambda s=steps: ours_samples(s, 1)),
                    ("langgraph", lambda s=steps: langgraph.samples(s, 1, durability="async")),
                    ("langgraph_sync", lambda s=steps: langgraph.samples(s, 1, durability="sync")),
                ):
                    t, b = sampler()
                    seconds.setdefault((who, steps), []).extend(t)
                    stored.setdefault((who, steps), []).extend(b)
        task = ours_prepare(large)
        profile = profile_top(lambda: ours_run(task))
        growth = ours_checkpoint_growth(task.id)
        tasks_delete([task.id])
    finally:
        langgraph.close()
        reference_schema_reset(drop_only=True)

    rate = {key: rate_stats(values, count=key[1]) for key, values in seconds.items()}
    kb = {key: stats(values, scale=1 / 1000) for key, values in stored.items()}
    ours_small, ours_large = rate[("ours", small)], rate[("ours", large)]
    flatness = ours_large["median"] / ours_small["median"]
    large_ratio = ours_large["median"] / rate[("langgraph", large)]["median"]
    kb_small, kb_large = kb[("ours", small)]["median"], kb[("ours", large)]["median"]
    figures = [
        figure(
            figure=f"Steps/s at {large} steps",
            unit="steps/s",
            ours=ours_large,
            reference=rate[("langgraph", large)],
            reference_label="LangGraph ReAct",
            target="≥ 2.0× LangGraph",
            met=large_ratio >= 2.0,
        ),
        figure(
            figure=f"Steps/s at {small} steps",
            unit="steps/s",
            ours=ours_small,
            reference=rate[("langgraph", small)],
            reference_label="LangGraph ReAct",
            target="(info)",
        ),
        figure(
            figure=f"Steps/s at {large} steps vs LangGraph durability=sync",
            unit="steps/s",
            ours=ours_large,
            reference=rate[("langgraph_sync", large)],
            reference_label="LangGraph ReAct, sync",
            target="(info)",
        ),
        figure(
            figure=f"Flatness: steps/s at {large} ÷ at {small} steps",
            unit="steps/s",
            ours=ours_large,
            reference=ours_small,
            reference_label=f"ours at {small} steps",
            target="≥ 0.90 (within 10%)",
            met=flatness >= 0.9,
        ),
        figure(
            figure=f"Stored per step at {large} steps",
            unit="KB",
            ours=kb[("ours", large)],
            reference=kb[("langgraph", large)],
            reference_label="LangGraph ReAct",
            target="≤ ~5 KB",
            met=kb_large <= 5.0,
        ),
        figure(
            figure=f"Stored per step at {small} steps",
            unit="KB",
            ours=kb[("ours", small)],
            reference=kb[("langgraph", small)],
            reference_label="LangGraph ReAct",
            target="≤ ~5 KB, flat",
            met=kb_small <= 5.0 and kb_large <= kb_small * 1.1,
        ),
    ]
    return {
        "title": TITLE,
        "figures": figures,
        "profiles": {f"ours: one task_run of {large} steps": profile},
        "details": {
            "steps": [small, large],
            "repeat": repeat,
            "ours_checkpoint_bytes_per_50_steps": growth,
        },
        "notes": (
            "Ours: `tasks.runtime.task_run` in-process (acquire → succeeded), scripted model, "
            "`noop` test tool, every checkpoint trigger of harness.yaml on. LangGraph: "
            "`create_react_agent` with a fake chat model making the same calls and a no-op "
            "`@tool`, `PostgresSaver` on the same database; its default durability (`async`, "
            "checkpoint writes overlap the next step) is the reference, `sync` is shown for "
            "information. A step = one model turn + one tool call. Stored bytes are "
            "`pg_column_size` of the rows each run leaves (ours: checkpoints + events + tool "
            "calls; LangGraph: checkpoints + blobs + writes), indexes excluded for both. "
            f"Our average checkpoint row per 50 steps of the {large}-step run: "
            + ", ".join(f"{b:,} B" for b in growth)
            + " (AgentState is bounded by the "
            "context policy: a recent-message window plus a rolling summary that grows to its "
            "cap, then stays flat)."
        ),
    }
