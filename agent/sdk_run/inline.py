"""The run's bookkeeping called inline from the SDK's event loop: both SDK runners run the loop
in the job's own thread (`asyncio.run`), and `inline(fn, ...)` calls the run's synchronous
bookkeeping (a ledger row, a checkpoint, a fenced write) from a coroutine of that loop, on the
job's thread and its database connection, with no thread hop.

Why not asgiref's sync_to_async: each call there is two thread hops (about 0.1 ms on an idle
machine, more beside the write-behind thread), four to five of them a step. Why it is safe
here: the loop is the run's own (one agent, one task, one thread), so a blocking write stalls
only what would wait for it anyway (the tool the write precedes, the node after the one it
records); a synchronous call has no `await` inside it, so two coroutines of the loop (tools
run together) cannot interleave inside one write or transaction. Django refuses synchronous
database access from a thread whose event loop is running (SynchronousOnlyOperation, a guard
against blocking a shared server loop); `inline` shows Django no running loop for the call's
duration, in this thread only, and puts it back after."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def inline(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """`fn(*args, **kwargs)` called from a coroutine of the run's loop, in its thread (the
    job's), where Django's database access is the job's own."""
    loop = asyncio.events._get_running_loop()
    asyncio.events._set_running_loop(None)
    try:
        return fn(*args, **kwargs)
    finally:
        asyncio.events._set_running_loop(loop)
