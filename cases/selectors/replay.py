"""The runtime's view of a replay: what the tool oracle answers from."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cases.models import CaseRun
from tasks.canonical import canonical_hash
from tasks.models import ToolCall


@dataclass(frozen=True)
class ReplaySetup:
    case_name: str
    on_divergence: str
    # Recorded calls, in order (cases.selectors.recording._call_entry).
    calls: list[dict[str, Any]]
    # {turn: model_decision payload} when the replay plays the recorded decisions.
    decisions: dict[int, dict[str, Any]] | None
    # (tool, arguments hash) of the calls the replay already made (a resumed replay).
    made: list[tuple[str, str]]
    # A graph's: the nodes whose writes held tool results in the recording (its ToolNodes).
    tool_nodes: tuple[str, ...] = ()
    # A graph's: how it was resumed after each pause for review (cases.selectors.graph).
    graph_resumes: tuple[dict[str, Any], ...] = ()


def replay_setup(*, task_id: Any) -> ReplaySetup | None:
    run = CaseRun.objects.select_related("case").filter(task_id=task_id).first()
    if run is None:
        return None
    recording = run.case.recording
    decisions = None
    if run.model == "recorded":
        decisions = {d["turn"]: d for d in recording.get("decisions", [])}
    made = [
        (tool, canonical_hash(args))
        for tool, args in ToolCall.objects.filter(task_id=task_id)
        .order_by("id")
        .values_list("tool", "arguments")
    ]
    return ReplaySetup(
        case_name=run.case.name,
        on_divergence=run.on_divergence,
        calls=list(recording.get("calls", [])),
        decisions=decisions,
        made=made,
        tool_nodes=tuple(recording.get("graph_tool_nodes") or ()),
        graph_resumes=tuple(recording.get("graph_resumes") or ()),
    )
