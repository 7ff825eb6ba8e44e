"""The async surface of the LangGraph saver (what LangGraph's async loop and the conformance
suite call): each method runs the sync core's implementation on the saver's database thread,
since Django refuses blocking queries on an event loop."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Self, TypeVar

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)

from checkpoints.langgraph.maintenance import prune_arguments

T = TypeVar("T")


class AsyncSaverMethods:
    """The async methods of DjangoCheckpointSaver. Mixed in ahead of BaseCheckpointSaver (whose
    async methods raise NotImplementedError); relies on the saver's `_db_thread`,
    `_on_db_thread`, `close` and its `_get_tuple`, `_list`, `_put`, ... implementations."""

    if TYPE_CHECKING:  # what the saver's other parts define (saver, reads, writes, maintenance)

        def _db_thread(self) -> ThreadPoolExecutor: ...
        @staticmethod
        def _on_db_thread(
            fn: Callable[..., T], args: tuple[Any, ...], kwargs: dict[str, Any]
        ) -> T: ...
        def close(self) -> None: ...
        def _get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None: ...
        def _list(
            self,
            config: RunnableConfig | None,
            *,
            filter: dict[str, Any] | None,
            before: RunnableConfig | None,
            limit: int | None,
        ) -> list[CheckpointTuple]: ...
        def _put(
            self,
            config: RunnableConfig,
            checkpoint: Checkpoint,
            metadata: CheckpointMetadata,
            new_versions: ChannelVersions,
        ) -> RunnableConfig: ...
        def _put_writes(
            self,
            config: RunnableConfig,
            writes: Sequence[tuple[str, Any]],
            task_id: str,
            task_path: str,
        ) -> None: ...
        def _delete_threads(self, thread_ids: list[str]) -> None: ...
        def _delete_for_runs(self, run_ids: list[str]) -> None: ...
        def _copy_thread(self, source: str, target: str) -> None: ...
        def _prune(self, thread_ids: list[str], strategy: str) -> None: ...

    async def _acall(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._db_thread(), self._on_db_thread, fn, args, kwargs)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        # close() waits for the database thread: off the event loop.
        await asyncio.get_running_loop().run_in_executor(None, self.close)

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await self._acall(self._get_tuple, config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        for item in await self._acall(
            self._list, config, filter=filter, before=before, limit=limit
        ):
            yield item

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return await self._acall(self._put, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        await self._acall(self._put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        await self._acall(self._delete_threads, [str(thread_id)])

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await self._acall(self._delete_for_runs, [str(r) for r in run_ids])

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await self._acall(self._copy_thread, str(source_thread_id), str(target_thread_id))

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        thread_ids = prune_arguments(thread_ids, strategy)
        await self._acall(self._prune, thread_ids, strategy)
