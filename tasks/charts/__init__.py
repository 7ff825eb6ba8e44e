"""Figure data for the task page: the execution timeline as a Plotly figure dict
(tasks.charts.timeline.task_timeline), and the Plotly text helpers every chart of the site uses.

The modules, bottom up: formatting (escaping, labels, times, durations), legend (rows,
colours, lengths), scope (which events and steps a timeline draws), bars, marks (recoveries),
checkpoint_marks, frame (the timeline being read), idle (breaks cut out of the time axis),
overview (collapsed steps), layout, summary (the text alternative) and timeline."""

from tasks.charts.bars import Bars
from tasks.charts.checkpoint_marks import (
    BEFORE_CALL_TRIGGERS,
    checkpoint_name,
    checkpoint_names,
    checkpoint_traces,
    superseded_ranges,
)
from tasks.charts.formatting import (
    LABEL_CHARS,
    category_axis,
    duration_text,
    duration_words,
    plotly_escape,
    plotly_hover,
    plotly_label,
    plotly_text,
    plotly_time,
    short_text,
)
from tasks.charts.frame import Collapsed, Frame, call_label, call_link
from tasks.charts.idle import IDLE_GAP_S, WORK_SHARE, IdleBreak, idle_breaks
from tasks.charts.layout import timeline_layout
from tasks.charts.legend import (
    ARGUMENTS_CHARS,
    ERROR_CHARS,
    LEVEL_COLORS,
    ROW_BACKOFF,
    ROW_CHECKPOINTS,
    ROW_HELD,
    ROW_HUMAN,
    ROW_MODEL,
    ROW_RECOVERY,
    ROW_STEPS,
    STATUS_COLORS,
    SUPERSEDED_OPACITY,
    node_row,
    tool_row,
)
from tasks.charts.marks import RECOVERY_MARKS
from tasks.charts.overview import OVERVIEW_WIDTH
from tasks.charts.scope import (
    COLLAPSED_CHECKPOINT_TRIGGERS,
    TIMELINE_EVENT_TYPES,
    TIMELINE_KEPT_EVENTS,
    TIMELINE_KEPT_FAILED_EVENTS,
    TIMELINE_STEPS,
    timeline_from_step,
)
from tasks.charts.summary import SUMMARY_CALLS, timeline_summary
from tasks.charts.timeline import task_timeline

__all__ = [
    "ARGUMENTS_CHARS",
    "BEFORE_CALL_TRIGGERS",
    "COLLAPSED_CHECKPOINT_TRIGGERS",
    "ERROR_CHARS",
    "IDLE_GAP_S",
    "LABEL_CHARS",
    "LEVEL_COLORS",
    "OVERVIEW_WIDTH",
    "RECOVERY_MARKS",
    "ROW_BACKOFF",
    "ROW_CHECKPOINTS",
    "ROW_HELD",
    "ROW_HUMAN",
    "ROW_MODEL",
    "ROW_RECOVERY",
    "ROW_STEPS",
    "STATUS_COLORS",
    "SUMMARY_CALLS",
    "SUPERSEDED_OPACITY",
    "TIMELINE_EVENT_TYPES",
    "TIMELINE_KEPT_EVENTS",
    "TIMELINE_KEPT_FAILED_EVENTS",
    "TIMELINE_STEPS",
    "WORK_SHARE",
    "Bars",
    "Collapsed",
    "Frame",
    "IdleBreak",
    "call_label",
    "call_link",
    "category_axis",
    "checkpoint_name",
    "checkpoint_names",
    "checkpoint_traces",
    "duration_text",
    "duration_words",
    "idle_breaks",
    "node_row",
    "plotly_escape",
    "plotly_hover",
    "plotly_label",
    "plotly_text",
    "plotly_time",
    "short_text",
    "superseded_ranges",
    "task_timeline",
    "timeline_from_step",
    "timeline_layout",
    "timeline_summary",
    "tool_row",
]
