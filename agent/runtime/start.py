"""Start or resume a run: load the head checkpoint (verified), or begin from the spec; bring
the workspace and the agent's context in line with it; list the task's MCP tools."""

from __future__ import annotations

import dataclasses
import shutil
from typing import Any

from agent.context import goal_facts
from agent.retry import TRANSIENT, retry_policy
from agent.runtime.drift_check import drift_at_pickup
from agent.runtime.ledger import ledger_load
from agent.runtime.migrate import migrations_apply
from agent.runtime.run import Run, StopRun
from agent.tools.mcp_client import McpUnavailable, mcp_tools_discover, mcp_tools_now
from checkpoints.alignment import context_align
from checkpoints.services import NoValidCheckpoint, checkpoint_load_latest_valid
from checkpoints.snapshots import snapshot_materialise_if_missing
from multiagent.recovery import shared_restore_finish
from multiagent.selectors import group_root
from tasks.agent_state import AgentState, ErrorInfo, Message
from tasks.events import EventType
from tasks.paths import file_write
from tasks.tools.mcp import mcp_servers_named, mcp_tool_spec


def start_or_resume(run: Run) -> None:
    """A new task's first write: `task_start` with the task_start checkpoint. A task that has
    a checkpoint resumes from it: `resumed` (and what resuming changed) joins the first
    write of its step, so a run resumed after a review writes once before the tool."""
    try:
        loaded = checkpoint_load_latest_valid(
            task_id=run.task_id, head_id=run.head_id, epoch=run.epoch
        )
    except NoValidCheckpoint as exc:
        raise StopRun("checkpoint_corrupted", str(exc)) from None
    run.workspace.mkdir(parents=True, exist_ok=True)
    if loaded is None or (loaded.state.planning and not run.planning):
        # A plan task's execution run starts from the task's start, as its dry run did, on
        # a new branch (fresh call_ids) against the original workspace (agent.runtime.plan).
        run.state = _initial_state(run)
        run.state.planning = run.planning
        run.state.branch = loaded.state.branch + 1 if loaded is not None else 0
        if loaded is not None:
            # The dry run's copy served its review; the plan keeps what it saw of it.
            shutil.rmtree(run.task.plan_workspace_path, ignore_errors=True)
        for rel, content in run.spec.workspace.files.items():
            file_write(run.workspace, rel, content.encode())
        phase = {"planning": "plan", "executing": "execution"}.get(run.task.plan_phase)
        run.event(
            EventType.TASK_STARTED,
            {"worker": run.worker_id, "epoch": run.epoch, **({"plan": phase} if phase else {})},
        )
        _mcp_tools_list(run)
        run.commit(trigger="task_start")
        return
    run.state = loaded.state
    _mcp_tools_list(run)
    ledger_load(run)
    if loaded.checkpoint.id != run.head_id:
        run.event(
            EventType.CHECKPOINT_FALLBACK,
            {"checkpoint_id": str(loaded.checkpoint.id), "seq": loaded.checkpoint.seq},
        )
        run.head_id = loaded.checkpoint.id
    _restore_workspace(run, loaded)
    _restore_shared(run)
    run.resumed_from = loaded
    if run.state.compensation_open() is None:
        # A rollback's compensations run first; the agent is told once they have
        # (agent.runtime.compensate), with what they undid and what they could not.
        context_align_now(run)
    run.event(
        EventType.RESUMED,
        {
            "worker": run.worker_id,
            "epoch": run.epoch,
            "checkpoint_id": str(loaded.checkpoint.id),
            "seq": loaded.checkpoint.seq,
            "phase": run.state.phase,
        },
    )
    # Written with the run's first step write (before a tool's side effect at the latest),
    # unless a migration a decision chose writes first.
    drift_at_pickup(run, loaded.checkpoint)
    migrations_apply(run)


def _initial_state(run: Run) -> AgentState:
    tools = ", ".join(run.spec.tools) or "none"
    system = run.spec.system_prompt or (
        "You are an agent working inside a sandboxed workspace. Use the tools to reach the "
        f"goal, then give a final answer. Available tools: {tools}."
    )
    return AgentState(
        messages=[
            Message(role="system", content=system[: run.context.system_prompt_max_chars]),
            Message(role="user", content=run.spec.goal),
        ],
        hard_facts=goal_facts(run.spec.goal, run.context),
    )


def _mcp_tools_list(run: Run) -> None:
    """The task's MCP tools: listed from the servers when it starts (recorded in the state,
    so in the first checkpoint); when it resumes, listed again (what the servers offer now is
    what a call runs against; the drift check compares it with the head's record), or taken
    from the state when a server cannot be listed now."""
    if run.state.mcp_tools and mcp_servers_named(run.spec.tools):
        now = mcp_tools_now(connections=run.mcp, names=run.spec.tools)
        if now is not None:
            run.state.mcp_tools = now
    if run.state.mcp_tools is None and mcp_servers_named(run.spec.tools):
        try:
            tools, reports = mcp_tools_discover(connections=run.mcp, names=run.spec.tools)
        except McpUnavailable as exc:
            run.note_mcp_errors()
            if exc.transient:
                _retry_mcp_listing(run, exc)
            raise StopRun("mcp_unavailable", str(exc)) from None
        run.state.mcp_tools = tools
        for report in reports:
            run.event(EventType.MCP_TOOLS_LISTED, report)
    for tool in run.state.mcp_tools or []:
        spec = mcp_tool_spec(tool)
        run.mcp_specs[tool.name] = dataclasses.replace(
            spec,
            func=run.mcp.caller(tool, idempotent=spec.idempotent),
            fingerprint=run.mcp.fingerprinter(tool),
        )


def _retry_mcp_listing(run: Run, exc: McpUnavailable) -> None:
    """A server that did not answer when the task (re)started: try again after a backoff,
    counted like the attempts of a model turn (the next model decision resets them); the
    task fails with `mcp_unavailable` once they are used up."""
    attempt = run.state.model_retries + 1
    policy = retry_policy(config=run.config, task_override=run.spec.retry)
    if attempt >= policy.max_attempts:
        return
    run.state.model_retries = attempt
    run.schedule_retry(
        attempt=attempt,
        delay_s=policy.delay_s(attempt),
        error=ErrorInfo(
            error_class=TRANSIENT, message=str(exc)[:2000], step_index=run.state.step_index
        ),
    )


def _restore_workspace(run: Run, loaded: Any) -> None:
    """Rebuild the workspace from the checkpoint's snapshot when it is missing here
    (another machine, a wiped disk); after an operator's recovery, bring it in line with
    the head wherever it is."""
    if snapshot_materialise_if_missing(
        workspace=run.workspace, manifest=loaded.snapshot, sync=run.state.recovery is not None
    ):
        run.event(EventType.WORKSPACE_MATERIALISED, {"checkpoint_id": str(loaded.checkpoint.id)})


def _restore_shared(run: Run) -> None:
    """After a group rollback whose restore of the shared directory a crash or an I/O error
    interrupted: finish it before this participant takes a step, or stop (failing closed: no
    agent works on a shared directory that is not where the rollback put it)."""
    if run.state.recovery is None:
        return
    root_id = group_root(run.task).id
    try:
        restored = shared_restore_finish(root_id=root_id)
    except Exception as exc:
        raise StopRun(
            "shared_restore_failed",
            f"the group's shared directory could not be restored to its global checkpoint: {exc}",
        ) from None
    if restored:
        run.event(EventType.WORKSPACE_MATERIALISED, {"shared": True, "root_id": str(root_id)})


def context_align_now(run: Run) -> None:
    """After a rollback, retry or redispatch, tell the agent what happened (see
    checkpoints.alignment)."""
    loaded = run.resumed_from
    summary = context_align(
        task_id=run.task_id,
        state=run.state,
        checkpoint=loaded.checkpoint,
        snapshot=loaded.snapshot,
    )
    if summary is not None:
        run.event(EventType.CONTEXT_ALIGNED, summary)
