"""(2) Loop overhead end to end: steps per second in one worker process, for two tools.

Ours: `agent.runtime.task_run` in-process against PostgreSQL (acquisition to `succeeded`),
the scripted model proposing one call per turn, then a final answer. Two variants:

- `read`: the `noop` test tool (a read-only step: the loop's best case);
- `write`: `write_file` of a new 300-character file per step (`notes/<i>.txt`): a
  side-effecting step with its pre-tool checkpoint and workspace snapshot — the usual case.

Reference: LangGraph's prebuilt ReAct agent (`langgraph.prebuilt.create_react_agent`) with a
zero-latency fake chat model emitting the same tool calls, a tool doing the same thing (a
no-op, or the same atomic file write into a directory of its own) and `PostgresSaver` on the
same PostgreSQL (LangGraph's default durability, "async", and "sync" for comparison).

Stored bytes per step: the rows a run leaves behind (pg_column_size of whole rows) — ours:
checkpoints + events + tool calls + their outputs (a write's diff) + the snapshot blobs it
created; LangGraph: checkpoints +
checkpoint_blobs + checkpoint_writes of the thread — divided by the number of steps. For the
finished `write` task at the larger size, also after retention (harness.yaml's keep rule).

Expected run time (quiet 2-CPU machine): smoke ~20 s; full ~3 min (7 repetitions of 50 and
200 steps × 2 variants × 3 contenders).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
import warnings
from pathlib import Path
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
from bench.durable_write import chat_text

TITLE = "Loop overhead end to end"
SIZES = {"smoke": {"steps": (3, 6), "repeat": 2}, "full": {"steps": (50, 200), "repeat": 7}}
VARIANTS = ("read", "write")
WRITE_CHARS = 300


def write_args(i: int, run: str) -> dict[str, str]:
    """The `write` variant's i-th call of a run: the same in ours and in LangGraph's tool.
    The run's id in the text keeps content-addressed blobs of earlier runs from being reused."""
    return {"path": f"notes/{i}.txt", "content": f"{run} {chat_text(i, WRITE_CHARS - 33)}"}


def _call(variant: str, i: int, run: str) -> tuple[str, dict[str, Any]]:
    return ("noop", {}) if variant == "read" else ("write_file", write_args(i, run))


# --- ours -------------------------------------------------------------------------------------


def ours_prepare(steps: int, variant: str = "read") -> Any:
    run = uuid.uuid4().hex
    calls = [_call(variant, i, run) for i in range(steps)]
    return scripted_task(
        script=[{"call": tool, "args": args} for tool, args in calls] + [{"final": "done"}],
        tools=[calls[0][0]],
        title=f"bench loop {variant} {steps}",
        max_steps=steps + 1,
    )


def ours_cleanup(task: Any) -> None:
    tasks_delete([task.id])
    shutil.rmtree(task.workspace_path, ignore_errors=True)


def ours_run(task: Any) -> None:
    from agent.runtime import task_run

    outcome = task_run(task_id=task.id)
    if outcome != "succeeded":
        raise RuntimeError(f"benchmark task {task.id} ended {outcome}")


def ours_stored_bytes(task_id: Any, blobs_since: Any = None) -> int:
    """Bytes of the task's rows, plus the snapshot blobs stored since `blobs_since` (the
    blobs its run created: blobs are shared, so they belong to no task)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT (SELECT coalesce(sum(pg_column_size(c.*)), 0) FROM checkpoints_checkpoint c"
            "        WHERE c.task_id = %(t)s)"
            "     + (SELECT coalesce(sum(pg_column_size(e.*)), 0) FROM tasks_taskevent e"
            "        WHERE e.task_id = %(t)s)"
            "     + (SELECT coalesce(sum(pg_column_size(k.*)), 0) FROM tasks_toolcall k"
            "        WHERE k.task_id = %(t)s)"
            "     + (SELECT coalesce(sum(pg_column_size(o.*)), 0) FROM tasks_tooloutput o"
            "        WHERE o.task_id = %(t)s)"
            "     + (SELECT coalesce(sum(pg_column_size(b.*)), 0) FROM checkpoints_blob b"
            "        WHERE %(since)s::timestamptz IS NOT NULL AND b.created_at >= %(since)s)",
            {"t": task_id, "since": blobs_since},
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


def ours_samples(steps: int, repeat: int, variant: str = "read") -> tuple[list[float], list[float]]:
    """(seconds per run, stored bytes per step per run)."""
    from django.utils import timezone

    seconds, per_step = [], []
    for _ in range(repeat):
        task = ours_prepare(steps, variant)
        started = timezone.now()
        seconds.append(timed(lambda task=task: ours_run(task)))
        per_step.append(ours_stored_bytes(task.id, started) / steps)
        ours_cleanup(task)
    return seconds, per_step


def ours_retention(steps: int) -> dict[str, Any]:
    """Stored bytes of one finished `write` task before and after retention."""
    from django.utils import timezone

    from checkpoints.models import Checkpoint
    from checkpoints.retention import checkpoints_thin_task
    from harness_base.config import harness_config

    task = ours_prepare(steps, "write")
    started = timezone.now()
    ours_run(task)
    before = ours_stored_bytes(task.id, started)
    checkpoints_before = Checkpoint.objects.filter(task_id=task.id).count()
    policy = harness_config().retention
    deleted = checkpoints_thin_task(task_id=task.id, policy=policy)
    after = ours_stored_bytes(task.id, started)
    ours_cleanup(task)
    return {
        "steps": steps,
        "bytes_before": before,
        "bytes_after": after,
        "checkpoints_before": checkpoints_before,
        "checkpoints_deleted": deleted,
        "policy": policy.model_dump(),
    }


# --- LangGraph --------------------------------------------------------------------------------


class RunContext:
    """What the current LangGraph run's fake model and tool share: the variant's calls come
    from the run id, and the write tool writes under the run's own directory."""

    def __init__(self) -> None:
        self.run = ""
        self.directory = Path()


def fake_model(steps: int, variant: str, context: RunContext) -> Any:
    """A chat model that makes the variant's `steps` calls, one per turn, then answers."""
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
                name, args = _call(variant, done, context.run)
                message = AIMessage(
                    content="", tool_calls=[{"name": name, "args": args, "id": f"call_{done}"}]
                )
            else:
                message = AIMessage(content="done")
            return ChatResult(generations=[ChatGeneration(message=message)])

        def bind_tools(self, tools, **kwargs):
            return self

    return FakeToolCaller(steps=steps)


def langgraph_tool(variant: str, context: RunContext) -> Any:
    from langchain_core.tools import tool

    @tool
    def noop() -> dict:
        """Do nothing (for benchmarks of the loop's own overhead)."""
        return {"ok": True}

    @tool
    def write_file(path: str, content: str) -> dict:
        """Create or replace a text file (atomically, as the harness's write_file does)."""
        target = context.directory / path
        target.parent.mkdir(parents=True, exist_ok=True)
        data = content.encode("utf-8")
        tmp = target.with_name(f".{target.name}.tmp")
        with open(tmp, "wb") as fh:
            fh.write(data)
        os.replace(tmp, target)
        return {"path": path, "bytes": len(data)}

    return noop if variant == "read" else write_file


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
        self.agents: dict[tuple[int, str], Any] = {}
        self.context = RunContext()
        self.root = Path(tempfile.mkdtemp(prefix="bench-loop-langgraph-"))

    def agent(self, steps: int, variant: str) -> Any:
        if (steps, variant) not in self.agents:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # create_react_agent is deprecated in 1.x
                from langgraph.prebuilt import create_react_agent

                self.agents[steps, variant] = create_react_agent(
                    fake_model(steps, variant, self.context),
                    [langgraph_tool(variant, self.context)],
                    checkpointer=self.saver,
                )
        return self.agents[steps, variant]

    def run(self, steps: int, variant: str, *, durability: str, thread_id: str) -> None:
        from langchain_core.messages import HumanMessage, ToolMessage

        self.context.run = uuid.uuid4().hex
        self.context.directory = self.root / thread_id
        out = self.agent(steps, variant).invoke(
            {"messages": [HumanMessage(content="benchmark")]},
            {"configurable": {"thread_id": thread_id}, "recursion_limit": 2 * steps + 10},
            durability=durability,
        )
        tool_messages = sum(isinstance(m, ToolMessage) for m in out["messages"])
        if tool_messages != steps or out["messages"][-1].content != "done":
            raise RuntimeError(f"LangGraph run made {tool_messages} tool calls, not {steps}")
        if variant == "write" and len(list(self.context.directory.rglob("*.txt"))) != steps:
            raise RuntimeError("LangGraph's write tool did not write every file")
        shutil.rmtree(self.context.directory, ignore_errors=True)

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
        self, steps: int, repeat: int, variant: str = "read", *, durability: str
    ) -> tuple[list[float], list[float]]:
        seconds, per_step = [], []
        for _ in range(repeat):
            thread_id = str(uuid.uuid4())
            seconds.append(
                timed(
                    lambda t=thread_id: self.run(steps, variant, durability=durability, thread_id=t)
                )
            )
            per_step.append(self.stored_bytes(thread_id) / steps)
            self.saver.delete_thread(thread_id)
        return seconds, per_step

    def close(self) -> None:
        self.conn.close()
        shutil.rmtree(self.root, ignore_errors=True)


# --- the benchmark ----------------------------------------------------------------------------


def run(size: str) -> dict[str, Any]:
    params = SIZES[size]
    small, large = params["steps"]
    repeat = params["repeat"]
    reference_schema_reset()
    langgraph = LangGraphAgent()
    seconds: dict[tuple[str, str, int], list[float]] = {}
    stored: dict[tuple[str, str, int], list[float]] = {}
    try:
        for variant in VARIANTS:
            # Warm both paths up (imports, prepared plans) before measuring.
            ours_samples(3, 1, variant)
            langgraph.samples(3, 1, variant, durability="async")
        # Alternate ours / LangGraph per repetition so a busy moment hits both.
        for _ in range(repeat):
            for variant in VARIANTS:
                for steps in (small, large):
                    for who, sampler in (
                        ("ours", lambda s=steps, v=variant: ours_samples(s, 1, v)),
                        (
                            "langgraph",
                            lambda s=steps, v=variant: langgraph.samples(
                                s, 1, v, durability="async"
                            ),
                        ),
                        (
                            "langgraph_sync",
                            lambda s=steps, v=variant: langgraph.samples(
                                s, 1, v, durability="sync"
                            ),
                        ),
                    ):
                        t, b = sampler()
                        seconds.setdefault((who, variant, steps), []).extend(t)
                        stored.setdefault((who, variant, steps), []).extend(b)
        profiles, growth = {}, {}
        for variant in VARIANTS:
            task = ours_prepare(large, variant)
            profiles[f"ours: one task_run of {large} {variant} steps"] = profile_top(
                lambda task=task: ours_run(task)
            )
            growth[variant] = ours_checkpoint_growth(task.id)
            ours_cleanup(task)
        retention = ours_retention(large)
    finally:
        langgraph.close()
        reference_schema_reset(drop_only=True)

    rate = {key: rate_stats(values, count=key[2]) for key, values in seconds.items()}
    kb = {key: stats(values, scale=1 / 1000) for key, values in stored.items()}
    figures = []
    # (variant, ratio to LangGraph at the larger size, at the smaller size, KB per step)
    targets = (("read", 2.5, None, 5.0), ("write", 2.0, 1.3, 8.0))
    for variant, target_ratio, small_ratio_target, kb_target in targets:
        ours_small, ours_large = rate[("ours", variant, small)], rate[("ours", variant, large)]
        flatness = ours_large["median"] / ours_small["median"]
        large_ratio = ours_large["median"] / rate[("langgraph", variant, large)]["median"]
        small_ratio = ours_small["median"] / rate[("langgraph", variant, small)]["median"]
        kb_small = kb[("ours", variant, small)]["median"]
        kb_large = kb[("ours", variant, large)]["median"]
        tool = "no-op" if variant == "read" else "write_file"
        figures += [
            figure(
                figure=f"{tool}: steps/s at {large} steps",
                unit="steps/s",
                ours=ours_large,
                reference=rate[("langgraph", variant, large)],
                reference_label="LangGraph ReAct",
                target=f"≥ {target_ratio}× LangGraph",
                met=large_ratio >= target_ratio,
            ),
            figure(
                figure=f"{tool}: steps/s at {small} steps",
                unit="steps/s",
                ours=ours_small,
                reference=rate[("langgraph", variant, small)],
                reference_label="LangGraph ReAct",
                target=f"≥ {small_ratio_target}× LangGraph" if small_ratio_target else "(info)",
                met=small_ratio >= small_ratio_target if small_ratio_target else None,
            ),
            figure(
                figure=f"{tool}: steps/s at {large} steps vs LangGraph durability=sync",
                unit="steps/s",
                ours=ours_large,
                reference=rate[("langgraph_sync", variant, large)],
                reference_label="LangGraph ReAct, sync",
                target="(info)",
            ),
            figure(
                figure=f"{tool}: flatness, steps/s at {large} ÷ at {small} steps",
                unit="steps/s",
                ours=ours_large,
                reference=ours_small,
                reference_label=f"ours at {small} steps",
                target="≥ 0.90 (within 10%)",
                met=flatness >= 0.9,
            ),
            figure(
                figure=f"{tool}: stored per step at {large} steps",
                unit="KB",
                ours=kb[("ours", variant, large)],
                reference=kb[("langgraph", variant, large)],
                reference_label="LangGraph ReAct",
                target=f"≤ ~{kb_target:g} KB",
                met=kb_large <= kb_target,
            ),
            figure(
                figure=f"{tool}: stored per step at {small} steps",
                unit="KB",
                ours=kb[("ours", variant, small)],
                reference=kb[("langgraph", variant, small)],
                reference_label="LangGraph ReAct",
                target=f"≤ ~{kb_target:g} KB, flat",
                met=kb_small <= kb_target and kb_large <= kb_small * 1.1,
            ),
        ]
    figures.append(
        figure(
            figure=f"write_file: stored bytes of a finished {large}-step task, after retention",
            unit="KB",
            ours=stats([retention["bytes_after"]], scale=1 / 1000),
            reference=stats([retention["bytes_before"]], scale=1 / 1000),
            reference_label="the same task before retention",
            target="(info) what the keep rule needs",
            note=(
                f"{retention['checkpoints_deleted']} of {retention['checkpoints_before']} "
                f"checkpoints removed under {retention['policy']}"
            ),
        )
    )
    return {
        "title": TITLE,
        "figures": figures,
        "profiles": profiles,
        "details": {
            "steps": [small, large],
            "repeat": repeat,
            "ours_checkpoint_bytes_per_50_steps": growth,
            "retention": retention,
        },
        "notes": (
            "Ours: `agent.runtime.task_run` in-process (acquire → succeeded), scripted model, "
            "every checkpoint trigger of harness.yaml on; the `noop` test tool (read-only "
            f"steps) or `write_file` of a new {WRITE_CHARS}-character file per step. "
            "LangGraph: `create_react_agent` with a fake chat model making the same calls and "
            "a `@tool` doing the same (nothing, or the same atomic file write), "
            "`PostgresSaver` on the same database; its default durability (`async`, "
            "checkpoint writes overlap the next step) is the reference, `sync` is shown for "
            "information. A step = one model turn + one tool call. Stored bytes are "
            "`pg_column_size` of the rows each run leaves (ours: checkpoints + events + tool "
            "calls + the snapshot blobs the run created; LangGraph: checkpoints + blobs + "
            "writes), indexes excluded for both. Our average checkpoint row per 50 steps of "
            f"the {large}-step runs: "
            + "; ".join(
                f"{variant}: " + ", ".join(f"{b:,} B" for b in sizes)
                for variant, sizes in growth.items()
            )
            + " (AgentState is bounded by the context policy: a recent-message window plus "
            "a rolling summary that grows to its cap, then stays flat)."
        ),
    }
