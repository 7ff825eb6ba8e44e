"""An object named in harness.yaml as "module:attr.path" (an agent, a graph, a runner)."""

from __future__ import annotations

import importlib
from typing import Any


def object_at(ref: str) -> Any:
    """Import `module` and walk `attr.path` from it. Only operators name code to import."""
    module_name, _, attr_path = ref.partition(":")
    target: Any = importlib.import_module(module_name)
    for attr in attr_path.split("."):
        target = getattr(target, attr)
    return target
