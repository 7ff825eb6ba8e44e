"""Real LangGraph runs on DjangoCheckpointSaver: several graphs at once, each fanning out to
parallel nodes (LangGraph saves from its own thread pool), sync and async, then an interrupt
resumed from the stored checkpoint. Prints a JSON summary. Run on a fresh SQLite file by
test_langgraph_saver.py: this is the workload that used to fail with "database is locked"."""

from __future__ import annotations

import asyncio
import json
import operator
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Annotated, Any, TypedDict

RUNS_PER_THREAD = 4
THREADS = 4
FAN_OUT = 4


class State(TypedDict):
    items: Annotated[list[str], operator.add]


def build_graph(checkpointer: Any) -> Any:
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import interrupt

    def branch(name: str):
        def node(state: State) -> dict:
            return {"items": [name]}

        return node

    def gate(state: State) -> dict:
        answer = interrupt({"question": "ship it?", "items": len(state["items"])})
        return {"items": [f"gate:{answer}"]}

    builder = StateGraph(State)
    builder.add_node("start", lambda state: {"items": ["start"]})
    builder.add_edge(START, "start")
    for i in range(FAN_OUT):
        builder.add_node(f"b{i}", branch(f"b{i}"))
        builder.add_edge("start", f"b{i}")
    builder.add_node("gate", gate)
    builder.add_edge([f"b{i}" for i in range(FAN_OUT)], "gate")
    builder.add_edge("gate", END)
    return builder.compile(checkpointer=checkpointer)


def run_one(graph: Any, thread_id: str) -> list[str]:
    from langgraph.types import Command

    config = {"configurable": {"thread_id": thread_id}}
    graph.invoke({"items": []}, config)
    assert graph.get_state(config).next == ("gate",), graph.get_state(config)
    return graph.invoke(Command(resume="yes"), config)["items"]


async def arun_one(graph: Any, thread_id: str) -> list[str]:
    from langgraph.types import Command

    config = {"configurable": {"thread_id": thread_id}}
    await graph.ainvoke({"items": []}, config)
    return (await graph.ainvoke(Command(resume="yes"), config))["items"]


def main() -> int:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "harness_site.settings")
    import django
    from django.core.management import call_command
    from django.db import connection

    django.setup()
    call_command("migrate", verbosity=0)
    from checkpoints.langgraph import DjangoCheckpointSaver

    def worker(n: int) -> list[list[str]]:
        # One saver per thread, as one per RQ job: each has its own connections.
        with DjangoCheckpointSaver() as saver:
            graph = build_graph(saver)
            return [run_one(graph, f"sync-{n}-{i}") for i in range(RUNS_PER_THREAD)]

    with ThreadPoolExecutor(THREADS) as pool:
        sync_results = [r for rs in pool.map(worker, range(THREADS)) for r in rs]

    async def async_runs() -> list[list[str]]:
        saver = DjangoCheckpointSaver()
        try:
            graph = build_graph(saver)
            return await asyncio.gather(*(arun_one(graph, f"async-{i}") for i in range(THREADS)))
        finally:
            saver.close()

    async_results = asyncio.run(async_runs())

    with DjangoCheckpointSaver() as saver:
        history = len(
            list(build_graph(saver).get_state_history({"configurable": {"thread_id": "sync-0-0"}}))
        )
    json.dump(
        {
            "vendor": connection.vendor,
            "results": [sorted(r) for r in sync_results + async_results],
            "history": history,
        },
        sys.stdout,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
