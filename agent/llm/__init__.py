from __future__ import annotations

from typing import Any

from agent.llm.base import ModelAdapter, ModelCall, ModelDecision, ModelError
from agent.llm.openai import OpenAIChatModel
from agent.llm.replay import ReplayModel
from agent.llm.scripted import ScriptedModel


def model_for_spec(model_spec: Any) -> ModelAdapter:
    """The adapter for a TaskSpec's `model` (a validated pydantic model)."""
    kind = model_spec.kind
    if kind == "scripted":
        return ScriptedModel(model_spec)
    if kind == "openai":
        return OpenAIChatModel(model_spec)
    if kind == "replay":
        return ReplayModel(model_spec)
    raise ModelError(f"unknown model kind {kind!r}", error_class="permanent")


__all__ = ["ModelAdapter", "ModelCall", "ModelDecision", "ModelError", "model_for_spec"]
