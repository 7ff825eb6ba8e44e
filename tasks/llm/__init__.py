from __future__ import annotations

from typing import Any

from tasks.llm.base import ModelAdapter, ModelCall, ModelDecision, ModelError


def model_for_spec(model_spec: Any) -> ModelAdapter:
    """The adapter for a TaskSpec's `model` (a validated pydantic model)."""
    kind = model_spec.kind
    if kind == "scripted":
        from tasks.llm.scripted import ScriptedModel

        return ScriptedModel(model_spec)
    if kind == "openai":
        from tasks.llm.openai import OpenAIChatModel

        return OpenAIChatModel(model_spec)
    if kind == "replay":
        from tasks.llm.replay import ReplayModel

        return ReplayModel(model_spec)
    raise ModelError(f"unknown model kind {kind!r}", error_class="permanent")


__all__ = ["ModelAdapter", "ModelCall", "ModelDecision", "ModelError", "model_for_spec"]
