"""Drift found before a graph's next node runs (issue #43): when a worker picks a graph task
up (after a decision, a redispatch, a retry, a resume) it compares the versions the head graph
checkpoint was written with to the graph it loaded now (tasks.drift), the pending step being
the node(s) the checkpoint goes on to. Those are read from the checkpoint itself (the
`branch:to:<node>` channels written and not yet seen by their node), not from the new graph:
a graph whose next node was renamed no longer knows it and would silently go nowhere.

Drift that does not touch the next node is a `version_drift` event and the run goes on. Drift
that does (the node is gone, its edges or interrupt points changed) stops the task before
anything runs: a `version_drift` review (review.services.drift_gate, as the harness's own loop
opens one), on a graph call standing for the next step. Its choices: restart, cancel, migrate;
`continue` only when every next node still exists (review.services.drift_choices)."""

from __future__ import annotations

from typing import Any, NoReturn

from agent.graph_runner.core import GraphRunCore
from agent.versions import version_lookup, versions_current
from checkpoints.versions import graph_checkpoint_versions
from review.models import ReviewRequest, ReviewStatus
from review.services.drift_gate import VERSION_DRIFT, review_gate_version_drift
from tasks import services
from tasks.drift import Drift, drift
from tasks.events import EventType
from tasks.models import ToolCall, ToolCallStatus

BRANCH = "branch:to:"


def pending_nodes(checkpoint: dict[str, Any]) -> list[str]:
    """The nodes a raw LangGraph checkpoint goes on to: each `branch:to:<node>` channel
    that holds a value (a node consumes it when it runs) written since that node last saw it."""
    seen_all = checkpoint.get("versions_seen") or {}
    values = checkpoint.get("channel_values") or {}
    nodes = []
    for channel, version in sorted((checkpoint.get("channel_versions") or {}).items()):
        if not channel.startswith(BRANCH) or channel not in values:
            continue
        node = channel[len(BRANCH) :]
        seen = (seen_all.get(node) or {}).get(channel)
        if seen is None or version > seen:
            nodes.append(node)
    return nodes


def _merged(found: list[Drift]) -> Drift:
    first = found[0]
    return Drift(
        changes=first.changes,
        touches=[line for one in found for line in one.touches],
    )


def _drift_reviews(run: Any, checkpoint_id: str) -> list[ReviewRequest]:
    return list(
        ReviewRequest.objects.filter(
            task_id=run.task_id,
            kind=VERSION_DRIFT,
            reopened_as__isnull=True,
            tool_call__call_id__startswith=f"lgdrift:{checkpoint_id}:",
        ).select_related("tool_call")
    )


def graph_drift_at_pickup(run: Any, graph: Any) -> None:
    """Before anything runs on resume: record harmless drift; stop on drift that touches the
    next node (a `version_drift` review; raises Paused). Returns when the run may go on."""
    saved = run.saver.get_tuple(run.config)
    if saved is None:
        return  # a new thread: nothing was written under other code
    checkpoint_id = saved.config["configurable"]["checkpoint_id"]
    old = graph_checkpoint_versions(task_id=run.task_id, checkpoint_id=checkpoint_id)
    new = versions_current(run)
    if not old or not new:
        return
    nodes = pending_nodes(saved.checkpoint)
    bodies = version_lookup(run)
    found = _merged(
        [drift(old, new, {"node": node}, bodies=bodies) for node in nodes]
        or [drift(old, new, None, bodies=bodies)]
    )
    if not found.any:
        return
    run.event(
        EventType.VERSION_DRIFT,
        {
            "graph_checkpoint_id": checkpoint_id,
            "changes": found.summary(),
            "touches_next": found.touches_next,
            "touches": found.touches,
            "next": nodes,
        },
    )
    if not found.touches_next:
        return
    asked = _drift_reviews(run, checkpoint_id)
    if any(r.status == ReviewStatus.PENDING for r in asked):
        run.pause(reason="version_drift review pending")
    if any((r.choice or {}).get("decision") == "continue" for r in asked):
        return  # a person chose to go on with the new code
    _pause_for_graph_drift(run, checkpoint_id, nodes, found, new_nodes=_new_nodes(run, new))


def _new_nodes(run: Any, new: dict[str, Any]) -> set[str]:
    body = version_lookup(run)(new["graph"]) if new.get("graph") else None
    return set((body or {}).get("nodes") or [])


def _pause_for_graph_drift(
    run: GraphRunCore,
    checkpoint_id: str,
    nodes: list[str],
    found: Drift,
    *,
    new_nodes: set[str],
) -> NoReturn:
    """The next node does not run: a graph call standing for it awaits a version_drift
    review carrying `drift`, plus `nodes_gone` (the next nodes the new graph lacks)."""
    row = ToolCall(
        task_id=run.task_id,
        call_id=f"lgdrift:{checkpoint_id}:{run.epoch}"[:100],
        tool=(", ".join(nodes) or "graph")[:100],
        arguments={"next": nodes},
        risk="graph",
        step_index=run.step_index,
    )
    services.toolcall_transition(call=row, to=ToolCallStatus.AWAITING_REVIEW, write=False)
    body = {
        **found.as_json(),
        "next": nodes,
        "nodes_gone": [n for n in nodes if n not in new_nodes],
    }

    def pause(events: list[Any], open_review: Any) -> NoReturn:
        run.pending_events.extend(events)
        run.pause(
            reason=f"version drift: {row.tool}",
            inserts=[row],
            then=lambda: open_review(None),
        )

    review_gate_version_drift(
        tool_call=row,
        step_index=run.step_index,
        drift=body,
        policy=None,
        pause=pause,
        versions=versions_current(run),
    )
