"""The base of every part of a task spec."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class SpecModel(BaseModel):
    """Every part of a spec: unknown keys are refused, and so are NaN and infinite numbers."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
