"""DjangoCheckpointSaver: LangGraph checkpoints, channel blobs and pending writes in this
project's database (GraphCheckpoint, GraphBlob, GraphWrite), on PostgreSQL and on SQLite.

Usable for any graph, not only graphs run as harness tasks:

    from checkpoints.langgraph import DjangoCheckpointSaver
    graph = builder.compile(checkpointer=DjangoCheckpointSaver())
    graph.invoke(inputs, {"configurable": {"thread_id": "t1"}})

The package: `saver` (the class, where each call runs, the sync API), `aio` (the async API),
`writes` (put and put_writes), `fence` (their lease fencing), `reads` (get_tuple and list),
`maintenance` (delete, copy and prune whole threads), `sql` (tables, columns and the raw SQL
of the writes).
"""

from __future__ import annotations

from checkpoints.langgraph.maintenance import PRUNE_STRATEGIES
from checkpoints.langgraph.saver import DjangoCheckpointSaver

__all__ = ["PRUNE_STRATEGIES", "DjangoCheckpointSaver"]
