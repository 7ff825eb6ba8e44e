"""DjangoCheckpointSaver: the public class, its constructor, where each call runs, and the
sync API LangGraph calls. The implementations it runs are its mixins': the writes
(checkpoints.langgraph.writes), the reads (.reads), whole threads (.maintenance); the async API
is .aio.

Threads and connections. Django connections are per thread. LangGraph calls the sync methods
from a thread pool it creates per run (checkpoint saves run in the background) and the async
methods from an event loop, where Django refuses blocking queries. So a call runs inline only on
the thread that created the saver; every other call (all async ones included) runs on the
saver's own database thread, which keeps one connection for the saver's life instead of one per
pool thread left for the garbage collector. `close()` closes that connection.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from django.db import close_old_connections, connections
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from checkpoints.langgraph.aio import AsyncSaverMethods
from checkpoints.langgraph.maintenance import ThreadMaintenance, prune_arguments
from checkpoints.langgraph.reads import CheckpointReads
from checkpoints.langgraph.writes import CheckpointWrites

T = TypeVar("T")


class DjangoCheckpointSaver(
    AsyncSaverMethods,
    CheckpointWrites,
    CheckpointReads,
    ThreadMaintenance,
    BaseCheckpointSaver[str],
):
    """A LangGraph checkpointer on Django's default database. `task_id` links the checkpoints
    it writes to a harness task (the graph runner passes it); leave it None for other graphs.
    `epoch`: the lease epoch of the task run writing (the graph runner passes it): every write
    is then fenced on it (LeaseLost, nothing stored, once the lease is lost). `versions`: the
    code the graph runs with (agent.versions), recorded on every checkpoint it writes."""

    def __init__(
        self,
        *,
        task_id: Any = None,
        epoch: int | None = None,
        serde: SerializerProtocol | None = None,
        using: str = "default",
        versions: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(serde=serde)
        if epoch is not None and task_id is None:
            raise ValueError("a lease epoch fences a task's writes: task_id is required")
        self.task_id = task_id
        self.epoch = epoch
        self.using = using
        self.versions = versions or {}
        self._home = threading.get_ident()
        self._executor: ThreadPoolExecutor | None = None
        self._executor_lock = threading.Lock()

    # --- where a call runs ------------------------------------------------------------------

    def _db_thread(self) -> ThreadPoolExecutor:
        with self._executor_lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(
                    max_workers=1, thread_name_prefix="langgraph-saver"
                )
            return self._executor

    def _call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        if threading.get_ident() == self._home:
            return fn(*args, **kwargs)
        return self._db_thread().submit(self._on_db_thread, fn, args, kwargs).result()

    @staticmethod
    def _on_db_thread(fn: Callable[..., T], args: tuple[Any, ...], kwargs: dict[str, Any]) -> T:
        # A connection broken or past CONN_MAX_AGE since the last call is replaced, as Django
        # does at the start of a request.
        close_old_connections()
        return fn(*args, **kwargs)

    def close(self) -> None:
        """Close the database thread's connection (the caller's own connection is Django's)."""
        with self._executor_lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.submit(connections.close_all).result()
            executor.shutdown(wait=True)

    def __enter__(self) -> DjangoCheckpointSaver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- the sync API -----------------------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return self._call(self._get_tuple, config)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        yield from self._call(self._list, config, filter=filter, before=before, limit=limit)

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return self._call(self._put, config, checkpoint, metadata, new_versions)

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        self._call(self._put_writes, config, writes, task_id, task_path)

    def delete_thread(self, thread_id: str) -> None:
        self._call(self._delete_threads, [str(thread_id)])

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        self._call(self._delete_for_runs, [str(r) for r in run_ids])

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        self._call(self._copy_thread, str(source_thread_id), str(target_thread_id))

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        thread_ids = prune_arguments(thread_ids, strategy)
        self._call(self._prune, thread_ids, strategy)

    def get_next_version(self, current: str | int | None, channel: None = None) -> str:
        """Versions sort as strings: a zero-padded counter plus a random fraction, so two
        writers forking the same version never collide (PostgresSaver's scheme)."""
        if current is None:
            number = 0
        elif isinstance(current, int):
            number = current
        else:
            number = int(str(current).split(".")[0])
        return f"{number + 1:032}.{random.random():016}"
