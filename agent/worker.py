"""The RQ worker class for harness jobs (`settings.RQ["WORKER_CLASS"]`)."""

from __future__ import annotations

from typing import Any

import rq

# Imported here, once in the worker process, so each forked work horse starts with the loop,
# its services and the tool modules loaded instead of importing them per job (hundreds of ms
# of an approval's latency).
import agent.jobs  # noqa: F401
from tasks.tools.registry import load_tool_modules


def worker_warm_up() -> None:
    """Load the tool modules (built-ins, test tools, HARNESS_TOOL_MODULES) before any job."""
    load_tool_modules()


class Worker(rq.Worker):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        worker_warm_up()
