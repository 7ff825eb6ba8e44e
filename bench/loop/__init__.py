"""(2) Loop overhead end to end: steps per second in one worker process, for two tools.

Ours: `agent.runtime.task_run` in-process against PostgreSQL (acquisition to `succeeded`),
the scripted model proposing one call per turn, then a final answer. Two variants:

- `read`: the `noop` test tool (a read-only step: the loop's best case);
- `write`: `write_file` of a new 300-character file per step (`notes/<i>.txt`): a
  side-effecting step with its pre-tool checkpoint and workspace snapshot — the usual case.

Reference: LangGraph's prebuilt ReAct agent (`langgraph.prebuilt.create_react_agent`) with a
zero-latency fake chat model emitting the same tool calls, a tool doing the same thing (a
no-op, or the same atomic file write into a directory of its own) and `PostgresSaver` on the
same PostgreSQL (LangGraph's default durability, "async", and "sync" for comparison).

Stored bytes per step: the rows a run leaves behind (pg_column_size of whole rows) — ours:
checkpoints + events + tool calls + their outputs (a write's diff) + the snapshot blobs it
created; LangGraph: checkpoints +
checkpoint_blobs + checkpoint_writes of the thread — divided by the number of steps. For the
finished `write` task at the larger size, also after retention (harness.yaml's keep rule).

Expected run time (quiet 2-CPU machine): smoke ~20 s; full ~3 min (7 repetitions of 50 and
200 steps × 2 variants × 3 contenders).
"""

from __future__ import annotations

from typing import Any

from bench.common import (
    figure,
    rate_stats,
    stats,
)
from bench.loop.ours import (
    VARIANTS,
    WRITE_CHARS,
    ours_cleanup,
    ours_prepare,
    ours_run,
    ours_samples,
    ours_stored_bytes,
)
from bench.loop.sampling import _measure

TITLE = "Loop overhead end to end"


SIZES = {"smoke": {"steps": (3, 6), "repeat": 2}, "full": {"steps": (50, 200), "repeat": 7}}


def _variant_figures(
    rate: dict[Any, Any], kb: dict[Any, Any], *, small: int, large: int
) -> list[dict[str, Any]]:
    """Per variant: steps/s against LangGraph at both sizes, the flatness between them, and the
    bytes stored per step."""
    figures = []
    # (variant, ratio to LangGraph at the larger size, at the smaller size, KB per step,
    # ratio to DBOS and the sizes it applies at)
    targets = (
        ("read", 3.0, None, 1.5, 1.5, (large,)),
        ("write", 2.0, 1.3, 4.0, 1.0, (small, large)),
    )
    for variant, target_ratio, small_ratio_target, kb_target, dbos_ratio, dbos_at in targets:
        ours_small, ours_large = rate[("ours", variant, small)], rate[("ours", variant, large)]
        flatness = ours_large["median"] / ours_small["median"]
        large_ratio = ours_large["median"] / rate[("langgraph", variant, large)]["median"]
        small_ratio = ours_small["median"] / rate[("langgraph", variant, small)]["median"]
        kb_small = kb[("ours", variant, small)]["median"]
        kb_large = kb[("ours", variant, large)]["median"]
        tool = "no-op" if variant == "read" else "write_file"
        figures += [
            figure(
                figure=f"{tool}: steps/s at {steps} steps vs DBOS",
                unit="steps/s",
                ours=rate[("ours", variant, steps)],
                reference=rate[("dbos", variant, steps)],
                reference_label="DBOS workflow",
                target=f"≥ {dbos_ratio}× DBOS",
                met=rate[("ours", variant, steps)]["median"]
                >= dbos_ratio * rate[("dbos", variant, steps)]["median"],
            )
            for steps in dbos_at
        ]
        figures += [
            figure(
                figure=f"{tool}: steps/s at {large} steps",
                unit="steps/s",
                ours=ours_large,
                reference=rate[("langgraph", variant, large)],
                reference_label="LangGraph ReAct",
                others=[("DBOS", rate[("dbos", variant, large)])],
                target=f"≥ {target_ratio}× LangGraph",
                met=large_ratio >= target_ratio,
            ),
            figure(
                figure=f"{tool}: steps/s at {small} steps",
                unit="steps/s",
                ours=ours_small,
                reference=rate[("langgraph", variant, small)],
                reference_label="LangGraph ReAct",
                others=[("DBOS", rate[("dbos", variant, small)])],
                target=f"≥ {small_ratio_target}× LangGraph" if small_ratio_target else "(info)",
                met=small_ratio >= small_ratio_target if small_ratio_target else None,
            ),
            figure(
                figure=f"{tool}: steps/s at {large} steps vs LangGraph durability=sync",
                unit="steps/s",
                ours=ours_large,
                reference=rate[("langgraph_sync", variant, large)],
                reference_label="LangGraph ReAct, sync",
                target="(info)",
            ),
            figure(
                figure=f"{tool}: flatness, steps/s at {large} ÷ at {small} steps",
                unit="steps/s",
                ours=ours_large,
                reference=ours_small,
                reference_label=f"ours at {small} steps",
                target="≥ 0.90 (within 10%)",
                met=flatness >= 0.9,
            ),
            figure(
                figure=f"{tool}: stored per step at {large} steps",
                unit="KB",
                ours=kb[("ours", variant, large)],
                reference=kb[("langgraph", variant, large)],
                reference_label="LangGraph ReAct",
                others=[("DBOS", kb[("dbos", variant, large)])],
                target=f"≤ {kb_target:g} KB",
                met=kb_large <= kb_target,
            ),
            figure(
                figure=f"{tool}: stored per step at {small} steps",
                unit="KB",
                ours=kb[("ours", variant, small)],
                reference=kb[("langgraph", variant, small)],
                reference_label="LangGraph ReAct",
                others=[("DBOS", kb[("dbos", variant, small)])],
                target=f"≤ {kb_target:g} KB, flat within 10%",
                met=kb_small <= kb_target and kb_large <= kb_small * 1.1,
            ),
        ]
    return figures


def run(size: str) -> dict[str, Any]:
    params = SIZES[size]
    small, large = params["steps"]
    repeat = params["repeat"]
    seconds, stored, profiles, growth, retention = _measure(small, large, repeat)
    rate = {key: rate_stats(values, count=key[2]) for key, values in seconds.items()}
    kb = {key: stats(values, scale=1 / 1000) for key, values in stored.items()}
    figures = _variant_figures(rate, kb, small=small, large=large)
    figures.append(
        figure(
            figure=f"write_file: stored bytes of a finished {large}-step task, after retention",
            unit="KB",
            ours=stats([retention["bytes_after"]], scale=1 / 1000),
            reference=stats([retention["bytes_before"]], scale=1 / 1000),
            reference_label="the same task before retention",
            target="(info) what the keep rule needs",
            note=(
                f"{retention['checkpoints_deleted']} of {retention['checkpoints_before']} "
                f"checkpoints removed under {retention['policy']}"
            ),
        )
    )
    return {
        "title": TITLE,
        "figures": figures,
        "profiles": profiles,
        "details": {
            "steps": [small, large],
            "repeat": repeat,
            "ours_checkpoint_bytes_per_50_steps": growth,
            "retention": retention,
        },
        "notes": (
            "Ours: `agent.runtime.task_run` in-process (acquire → succeeded), scripted model, "
            "every checkpoint trigger of harness.yaml on; the `noop` test tool (read-only "
            f"steps) or `write_file` of a new {WRITE_CHARS}-character file per step. "
            "LangGraph: `create_react_agent` with a fake chat model making the same calls and "
            "a `@tool` doing the same (nothing, or the same atomic file write), "
            "`PostgresSaver` on the same database; its default durability (`async`, "
            "checkpoint writes overlap the next step) is the reference, `sync` is shown for "
            "information. DBOS: the same loop as a DBOS Transact workflow (a `@DBOS.step` "
            "model step returning the same call and a `@DBOS.step` tool step doing the same "
            "work per turn; its step outputs recorded in its system tables, schema "
            "`bench_dbos` on the same PostgreSQL; its bytes = the growth of every row in that "
            "schema over the run). A step = one model turn + one tool call. Stored bytes are "
            "`pg_column_size` of the rows each run leaves (ours: checkpoints + events + tool "
            "calls + the snapshot blobs the run created; LangGraph: checkpoints + blobs + "
            "writes), indexes excluded for both. Our average checkpoint row per 50 steps of "
            f"the {large}-step runs: "
            + "; ".join(
                f"{variant}: " + ", ".join(f"{b:,} B" for b in sizes)
                for variant, sizes in growth.items()
            )
            + " (AgentState is bounded by the context policy: a recent-message window plus "
            "a rolling summary that grows to its cap, then stays flat)."
        ),
    }


__all__ = [
    "SIZES",
    "TITLE",
    "VARIANTS",
    "WRITE_CHARS",
    "ours_cleanup",
    "ours_prepare",
    "ours_run",
    "ours_samples",
    "ours_stored_bytes",
    "run",
]
