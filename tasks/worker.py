"""The RQ worker class for harness jobs (`settings.RQ["WORKER_CLASS"]`)."""

from __future__ import annotations

from typing import Any

import rq


def worker_warm_up() -> None:
    """Import what every `run_task` job needs: the loop, the LangGraph graph runner (run_task
    imports it first; LangGraph alone takes seconds to import), the review and checkpoint
    services it imports lazily, and the tool modules. Done once in the worker process, each
    forked work horse starts with them loaded instead of importing them per job (hundreds of
    ms of an approval's latency)."""
    from review import policy, services  # noqa: F401  (imported lazily by tasks.runtime)
    from tasks import graph_runner, runtime  # noqa: F401
    from tasks.tools.registry import load_tool_modules

    load_tool_modules()


class Worker(rq.Worker):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        worker_warm_up()
