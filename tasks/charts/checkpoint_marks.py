"""A task's checkpoints on the timeline: their names (one taken before a call is named after
the call's tool), their markers by level (superseded ones in a trace of their own) and the
time ranges a rollback abandoned."""

from __future__ import annotations

import bisect
from collections import defaultdict
from datetime import UTC, datetime
from typing import Any

from tasks.charts.formatting import plotly_hover, plotly_time
from tasks.charts.legend import LEVEL_COLORS, ROW_CHECKPOINTS, SUPERSEDED_OPACITY
from tasks.selectors.event_fields import iso_datetime

# Checkpoint triggers named after the call they were taken before.
BEFORE_CALL_TRIGGERS = frozenset(
    {"before_write_operation", "before_external_call", "before_review"}
)


_NO_TIME = datetime.min.replace(tzinfo=UTC)


def superseded_ranges(checkpoints: list[dict[str, Any]]) -> list[tuple[datetime, datetime]]:
    """Time ranges of abandoned branches: from the checkpoint a run of superseded checkpoints
    forked from, to the next live checkpoint (the rollback's)."""
    ranges = []
    previous_live: datetime | None = None
    run_start: datetime | None = None
    for cp in checkpoints:
        if cp["superseded"]:
            if run_start is None:
                run_start = previous_live or cp["at"]
            continue
        if run_start is not None:
            ranges.append((run_start, cp["at"]))
            run_start = None
        previous_live = cp["at"]
    return ranges


def checkpoint_name(cp: dict[str, Any], *, before: str = "") -> str:
    """ "step 4 · before write_file", "step 3 · done", "step 2 · after model", "start"."""
    trigger, step = cp["trigger"] or "", cp["step_index"]
    if trigger == "task_start":
        return "start"
    if trigger == "after_step" and step:
        return f"step {step - 1} · done"  # taken as the next step begins
    if before and trigger in BEFORE_CALL_TRIGGERS:
        return f"step {step} · before {before}"
    return f"step {step} · {trigger.replace('_', ' ')}"


def checkpoint_names(
    checkpoints: list[dict[str, Any]], events: list[dict[str, Any]]
) -> dict[Any, str]:
    """Each checkpoint's name; one taken before a call is named after that call's tool: the
    call whose start (or review request) in the same step came last before it."""
    moments = sorted(
        (
            (iso_datetime(e["at"]), e["step_index"], e["tool"] or "")
            for e in events
            if e["type"] in ("tool_started", "review_requested") and e["at"]
        ),
        key=lambda moment: moment[0] or _NO_TIME,  # every row has its time (`e["at"]`)
    )
    names = {}
    for cp in checkpoints:
        before = ""
        if cp["trigger"] in BEFORE_CALL_TRIGGERS and cp["at"] is not None:
            at = bisect.bisect_right(moments, cp["at"], key=lambda moment: moment[0])
            if at and moments[at - 1][1] == cp["step_index"]:
                before = moments[at - 1][2]
        names[cp["id"]] = checkpoint_name(cp, before=before)
    return names


def checkpoint_traces(
    checkpoints: list[dict[str, Any]], names: dict[Any, str]
) -> list[dict[str, Any]]:
    groups: dict[tuple[str, bool], list[dict[str, Any]]] = defaultdict(list)
    for cp in checkpoints:
        groups[(cp["level"], cp["superseded"])].append(cp)
    traces = []
    for (level, superseded), marks in sorted(groups.items()):
        traces.append(
            {
                "type": "scatter",
                "mode": "markers",
                "name": f"checkpoints · {level}" + (" (superseded)" if superseded else ""),
                "y": [ROW_CHECKPOINTS] * len(marks),
                "x": [plotly_time(cp["at"]) for cp in marks],
                "hovertext": [
                    plotly_hover(
                        [
                            names[cp["id"]],
                            f"checkpoint #{cp['seq']} · {cp['level']} · {cp['trigger']}",
                            f"id {cp['id']}",
                            "superseded by a rollback" if superseded else "",
                        ]
                    )
                    for cp in marks
                ],
                "hoverinfo": "text",
                "marker": {
                    "symbol": "diamond",
                    "size": 9,
                    "color": LEVEL_COLORS.get(level, "#444"),
                    "opacity": SUPERSEDED_OPACITY if superseded else 1.0,
                },
                "meta": {"kind": "checkpoints", "level": level, "superseded": superseded},
            }
        )
    return traces
