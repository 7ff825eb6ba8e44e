"""WrappedModel: an Agents SDK Model that stands in front of the agent's own (`inner`) and
hands it everything it does not change itself: the harness's wrappers (HarnessModel, streamed
and aligned; HostedGateModel, the gate for hosted tools) override only the calls they add to."""

from __future__ import annotations

from typing import Any

from agents import Model


class WrappedModel(Model):
    """`inner` as the SDK sees it, but for what a subclass overrides."""

    def __init__(self, inner: Model) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        # What the harness reads of a model (its `model` name) and anything else: the inner's.
        if name in ("inner", "run"):
            raise AttributeError(name)
        return getattr(self.inner, name)

    def __repr__(self) -> str:
        return repr(self.inner)

    def __str__(self) -> str:
        return str(self.inner)

    def get_retry_advice(self, request: Any) -> Any:
        return self.inner.get_retry_advice(request)

    async def close(self) -> None:
        await self.inner.close()

    async def _cleanup_on_run_end(self, owner: object) -> None:
        await self.inner._cleanup_on_run_end(owner)
