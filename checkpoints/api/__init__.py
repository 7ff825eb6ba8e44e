"""`/api/v1/tasks/{id}/…` recovery endpoints: rollback (with a preview), retry, resume,
recover (strategy chosen at recovery time, including `auto`), the recovery plan, and the diff
of two checkpoints. Thin: parse, call one service or selector, shape the output.

The modules, from the bottom: `schemas` (bodies, answers), `calls` (operate, run: a
recovery service's refusals as statuses), then one module per family of endpoints, each with
its own router, mounted here under one tag in the order they had in one module: `actions`
(rollback preview, rollback, retry, recover, resume), `graphs` (a graph task's LangGraph
checkpoints, a graph rollback's preview), `inspection` (recovery plan, diff), `forks` (fork,
adopt).

Each operation spells out its `operation_id`: the one it had when this was one module
(`checkpoints_api_<function>`), which clients generated from the OpenAPI schema call it by."""

from ninja import Router

from checkpoints.api import actions, forks, graphs, inspection
from checkpoints.api.schemas import CheckpointOut

router = Router(tags=["recovery"])
for endpoints in (actions, graphs, inspection, forks):
    router.add_router("", endpoints.router)

__all__ = ["CheckpointOut", "router"]
