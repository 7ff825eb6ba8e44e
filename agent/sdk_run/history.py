"""SdkHistory, the part of SdkRun (agent.sdk_run.state) that stores the SDK's history
content-addressed (checkpoints.history): a checkpoint names the chain of chunks its lists share
with the checkpoints before it and keeps only the items after the last full chunk, so what a
step stores does not grow with the run. The new chunks go into `blobs`, which the runner's
fenced write inserts with the checkpoint that names them (`written` after it). The checkpoints'
payloads are compressed against a recent one (checkpoints.services.CheckpointCodec: its new
bases go into `blobs` too), so the tail a checkpoint keeps costs what changed since."""

from __future__ import annotations

from typing import Any, ClassVar

from agent.runtime.run import StopRun
from checkpoints.blobstore import blob_store_deferred
from checkpoints.history import HistoryBroken, HistoryChunks, history_expand_state
from checkpoints.models import Blob
from checkpoints.services import CheckpointCodec
from checkpoints.snapshots import DEFER_BLOB_BYTES
from tasks.agent_state import AgentState


class SdkHistory:
    """The SDK's history in and out of the run's checkpoints."""

    # Keys of the SDK's state holding a JSON text (its top-level lists stored as chunks); the
    # state's other lists are stored as chunks themselves.
    HISTORY_JSON: ClassVar[tuple[str, ...]] = ()
    state: AgentState

    def history_init(self) -> None:
        # The chunks' chains as last written, and the new blobs for the next fenced write.
        self.history = HistoryChunks()
        self.blobs: dict[str, Blob] = {}
        self.codec = CheckpointCodec()
        # The workspace snapshot of the last checkpoint (reused by one made with no tool run
        # since: agent.sdk_run.state checkpoint_stage).
        self.snapshot: dict[str, Any] | None = None

    def state_stored(self) -> AgentState:
        """The state as the next checkpoint keeps it: the SDK's lists as chunk chains, the
        new chunks into `blobs`."""
        sdk = self.history.compact_state(self.state.sdk, self.HISTORY_JSON)
        chunks = self.history.take_chunks()
        if chunks:
            blob_store_deferred(self.blobs, DEFER_BLOB_BYTES).put_absent(chunks)
        return self.state.model_copy(update={"sdk": sdk})

    def bases_stored(self) -> None:
        """The codec's new bases into `blobs`, for the write of the checkpoint using them."""
        bases = self.codec.take_bases()
        if bases:
            blob_store_deferred(self.blobs, DEFER_BLOB_BYTES).put_absent(bases)

    def written(self, ok: bool) -> None:
        """After a fenced write: its blobs are stored (or, failed, the next one writes every
        chunk its checkpoint names again, starts a base of its own and captures the workspace
        again)."""
        self.blobs = {}
        if not ok:
            self.history.forget()
            self.codec.forget()
            self.snapshot = None

    def history_restored(self) -> None:
        """The loaded state's SDK part whole again (its chains read, the writer told them)."""
        try:
            self.state.sdk = history_expand_state(self.state.sdk, into=self.history)
        except HistoryBroken as exc:
            raise StopRun("checkpoint_corrupted", f"the head checkpoint's history: {exc}") from None
