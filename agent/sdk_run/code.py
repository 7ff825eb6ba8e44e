"""The operator's code a foreign runner runs: the object harness.yaml registers
(`registered_object`: the object, or a factory's product, of the wanted type) and what its
task's `versions` hash (`version_parts_described`: the runner's description, or the code's
type alone when it cannot be described)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from agent.refs import object_at
from agent.versions import described

log = logging.getLogger(__name__)


def registered_object(
    ref: str | None,
    *,
    kind: type,
    kind_name: str,
    name: str,
    what: str,
    missing: type[Exception],
) -> Any:
    """The object at `ref` (harness.yaml's entry for the `what` called `name`), or what a
    factory there (any callable without arguments) returns, if it is a `kind`; else `missing`
    naming why. Only operators name code to import."""
    if ref is None:
        raise missing(f"{what} {name!r} is not registered in harness.yaml")
    target = object_at(ref)
    if not isinstance(target, kind) and callable(target):
        target = target()
    if not isinstance(target, kind):
        raise missing(f"{ref} is not {kind_name} (or a factory returning one)")
    return target


def version_parts_described(
    describe: Callable[..., dict[str, Any]], *, spec: dict[str, Any], agent: Any
) -> dict[str, Any]:
    """The keyword arguments of agent.versions.versions_build for an SDK's task; an agent
    `describe` cannot describe runs all the same, recorded by its type alone."""
    try:
        return describe(spec=spec, agent=agent)
    except Exception:
        log.warning("agent %r: definition not described", agent, exc_info=True)
        return {"spec": spec, "tools": {}, "agent": {"undescribed": described(type(agent))}}
