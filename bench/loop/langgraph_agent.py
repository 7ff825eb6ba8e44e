"""The reference side: LangGraph's `create_react_agent` with a fake chat model making the same
calls and a `@tool` doing the same, on `PostgresSaver` in the same database."""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
import warnings
from pathlib import Path
from typing import Any

from bench.common import (
    reference_conninfo,
    timed,
)
from bench.loop.ours import _call


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
