"""Plan tasks (issue #46; a spec's `"mode": "plan"`): a dry run, one review, then an execution
run held to what the review approved.

The dry run (`Run.planning`) runs in its own copy of the workspace (Task.plan_workspace_path):
read-only tools run for real; a side-effecting call becomes a plan item with its preview and
the state of its targets (plan_record). File writes are applied to the copy, so later steps
read what earlier ones would have written; commands, external and MCP calls do not run and are
answered as simulated (the model is told so), and every later item is marked as possibly
depending on such a result. When the model gives its final answer, one review of kind `plan`
opens with the items in order and the run's usage as the plan's estimate (plan_finish).

The execution run (`Run.plan`: the decided plan) starts from the task's start against the
original workspace. A side-effecting call that matches the next unused item of its tool (same
arguments as planned, its targets as the plan saw them) is answered by the plan's decision:
an approved item runs without a further review (with the reviewer's edit, if any: the edited
call's targets must be as they were at the decision, else it departs); a rejected
one is answered with the rejection and its reason (plan_gate). Any other call pauses for an
ordinary review that says how it departs from the plan."""

from __future__ import annotations

import dataclasses
from typing import Any, NoReturn

from agent.runtime.attempt import ToolOutcome
from agent.runtime.call_execute import execute
from agent.runtime.call_gate import gate_and_execute, refuse
from agent.runtime.review_gate import pause_for_plan, pause_for_review
from agent.runtime.run import Run
from review import policy
from review.models import TARGET_ARGUMENTS
from tasks import services
from tasks.agent_state import ProposedCall
from tasks.canonical import canonical_hash
from tasks.events import EventType
from tasks.fingerprint import call_targets, fingerprint_changes, previewed
from tasks.models import ToolCall, ToolCallStatus
from tasks.paths import call_paths
from tasks.tools.registry import ToolSpec

# The tools whose effect a dry run applies to its workspace copy (they touch only its files).
WORKSPACE_FILE_TOOLS = frozenset({"write_file", "append_file", "delete_file"})
RISK_ORDER = ("read", "write", "execute", "external", "destructive")
SIMULATED_NOTE = (
    "[simulated: plan run] {tool} did not run. This is a dry run that records what the task "
    "would do for a reviewer to approve; assume it succeeded, but its real output is unknown, "
    "so do not rely on any result from it."
)


def plan_record(run: Run, row: ToolCall, tool: ToolSpec, args: Any) -> ToolOutcome:
    """The dry run's side-effecting call: a plan item (a call the policy denies is refused as
    in any run: it could not be approved), applied to the copy or answered as simulated."""
    decision = policy.evaluate(tool=tool, args=row.arguments, spec=run.task.spec)
    if decision.action == "deny":
        return gate_and_execute(run, row, tool, args)
    preview, fingerprint = previewed(
        tool=tool, ctx=run.tool_context(row), args=args, arguments=row.arguments
    )
    applied = (
        tool.name in WORKSPACE_FILE_TOOLS
        and not tool.server
        and not any(path.startswith("/shared") for path in call_paths(row.arguments))
    )
    state = run.state
    reviewed = decision.action == "review"
    item = {
        "id": str(len(state.plan_items) + 1),
        "call_id": row.call_id,
        "tool": tool.name,
        "arguments": row.arguments,
        "preview": preview,
        "risk": tool.risk,
        "rules": decision.rules if reviewed else [],
        "approvals_required": decision.approvals_required if reviewed else 1,
        "forbid_creator": decision.forbid_creator if reviewed else False,
        "target_fingerprint": fingerprint,
        "simulated": not applied,
        # A result answered as simulated came before: this call may depend on it.
        "after_simulated": state.plan_simulated,
    }
    state.plan_items.append(item)
    run.event(
        EventType.PLAN_ITEM,
        {k: item[k] for k in ("id", "call_id", "tool", "risk", "simulated", "after_simulated")},
    )
    if applied:
        return execute(run, row, tool, args)
    observation = SIMULATED_NOTE.format(tool=tool.name)
    result = {"simulated": True, "observation": observation}
    services.toolcall_transition(call=row, to=ToolCallStatus.RUNNING, write=False)
    services.toolcall_transition(
        call=row, to=ToolCallStatus.SUCCEEDED, fields={"result": result}, write=False
    )
    run.deferred_rows.append(row)
    state.plan_simulated = True
    return ToolOutcome(status=ToolCallStatus.SUCCEEDED, observation=observation, result=result)


def plan_finish(run: Run) -> NoReturn:
    """The dry run's final answer: the `plan` review opens with its items (the task waits)."""
    state = run.state
    items = state.plan_items
    plan = {
        "plan_hash": plan_hash(items),
        "items": items,
        "estimate": {
            "tokens": state.budget.tokens,
            "cost_usd": round(state.budget.cost_usd, 6),
            "steps": state.budget.steps,
        },
        "final": (state.final or "")[:2000],
        "branch": state.branch,
    }
    risks = [RISK_ORDER.index(i["risk"]) for i in items if i["risk"] in RISK_ORDER]
    row = ToolCall(
        task_id=run.task_id,
        call_id=f"plan.{state.branch}.{state.turn_index}",
        tool="plan",
        arguments={"plan_hash": plan["plan_hash"], "items": len(items)},
        risk=RISK_ORDER[max(risks, default=0)],
        step_index=state.step_index,
        plan_mark="planned",
    )
    pause_for_plan(run, row, plan=plan)


def plan_hash(items: list[dict[str, Any]]) -> str:
    """What a plan decision binds: every item's id, tool, arguments and targets' state."""
    return canonical_hash(
        [[i["id"], i["tool"], i["arguments"], i["target_fingerprint"].get("hash")] for i in items]
    )


def plan_gate(run: Run, row: ToolCall, tool: ToolSpec, args: Any) -> ToolOutcome:
    """The execution run's side-effecting call, held to the decided plan (module docstring)."""
    plan = run.plan
    assert plan is not None  # an execution run (calls.call_run checked)
    used = set(run.state.plan_used)
    unused = [i for i in plan["items"] if i["id"] not in used and i["tool"] == tool.name]
    proposed = canonical_hash(row.arguments)
    same = [
        i
        for i in unused
        if proposed in (canonical_hash(i["planned"]), canonical_hash(i["arguments"] or {}))
    ]
    if not same:
        # The same tool on the same target with other arguments departs from that item; a
        # call on another target is not in the plan.
        near = [i for i in unused if _target(i["planned"]) == _target(row.arguments)]
        if not near:
            return _departure(
                run,
                row,
                tool,
                args,
                mark="outside_plan",
                item=None,
                how=f"{tool.name} on {_target(row.arguments) or 'this target'} is not in the plan",
            )
        item = near[0]
        changed = sorted(
            k
            for k in {*row.arguments, *item["planned"]}
            if row.arguments.get(k) != item["planned"].get(k)
        )
        return _departure(
            run,
            row,
            tool,
            args,
            mark="departed",
            item=item,
            how=f"arguments differ from plan item {item['id']} ({tool.name}): {', '.join(changed)}",
        )
    item = same[0]
    _preview, fingerprint = previewed(
        tool=tool, ctx=run.tool_context(row), args=args, arguments=item["planned"]
    )
    if fingerprint.get("hash") != item["target_hash"]:
        return _departure(
            run,
            row,
            tool,
            args,
            mark="departed",
            item=item,
            how=f"the target of plan item {item['id']} ({tool.name}) changed since the plan",
        )
    if item["decision"] == "edit" and item.get("edited_fingerprint") is not None:
        # What runs is the edited call: its targets must be as they were when it was decided.
        row.arguments = item["arguments"]
        args = tool.args_model.model_validate(row.arguments)
        row.arguments_hash = canonical_hash(row.arguments)
        current = call_targets(
            tool=tool, ctx=run.tool_context(row), args=args, arguments=row.arguments, local=True
        )
        changes = fingerprint_changes(
            recorded=item["edited_fingerprint"], current=current, since="since the plan's decision"
        )
        if changes:
            return _departure(
                run,
                row,
                tool,
                args,
                mark="departed",
                item=item,
                how=f"the target of edited plan item {item['id']} ({tool.name}) changed: "
                + "; ".join(changes),
            )
    run.state.plan_used.append(item["id"])
    row.plan_mark, row.plan_item = "in_plan", item["id"]
    run.event(
        EventType.PLAN_MATCHED,
        {
            "call_id": row.call_id,
            "item": item["id"],
            "decision": item["decision"],
            "review_id": plan["review_id"],
            "decided_by": plan["decided_by"],
        },
    )
    if item["decision"] == "reject":
        return refuse(
            run,
            row,
            ProposedCall(call_id=row.call_id, tool=row.tool, args=row.arguments),
            error_class="rejected",
            status=ToolCallStatus.REJECTED,
            what=f"{tool.name} was rejected in the plan review by {plan['decided_by']}: "
            f"{item['comment']}; it did not run",
            expected="what the reviewer asks",
            check=f"do not repeat the same {tool.name} call; adapt or finish",
        )
    if item["decision"] == "edit":
        row.arguments = item["arguments"]
        args = tool.args_model.model_validate(row.arguments)
    if policy.evaluate(tool=tool, args=row.arguments, spec=run.task.spec).action == "deny":
        return gate_and_execute(run, row, tool, args)
    row.arguments_hash = canonical_hash(row.arguments)
    return execute(run, row, tool, args)


def _target(arguments: dict[str, Any]) -> str:
    """What a call acts on (ReviewRequest.target's argument names): its path, command, URL or
    key."""
    for key in TARGET_ARGUMENTS:
        value = arguments.get(key)
        if value not in (None, "", []):
            return str(value)
    return ""


def _departure(
    run: Run,
    row: ToolCall,
    tool: ToolSpec,
    args: Any,
    *,
    mark: str,
    item: dict[str, Any] | None,
    how: str,
) -> NoReturn | ToolOutcome:
    """A call the plan does not cover pauses for an ordinary review naming how it departs (a
    standing rule does not stand in for it); a call the policy denies is refused."""
    row.plan_mark, row.plan_item = mark, item["id"] if item else ""
    decision = policy.evaluate(tool=tool, args=row.arguments, spec=run.task.spec)
    if decision.action == "deny":
        return gate_and_execute(run, row, tool, args)
    rule = {"name": "plan-departure", "action": "review", "source": "built-in", "departure": how}
    decision = dataclasses.replace(
        decision if decision.action == "review" else policy.PolicyDecision(action="review"),
        action="review",
        reason=f"departs from the plan: {how}"[:200],
        rules=[rule, *(decision.rules if decision.action == "review" else [])],
    )
    pause_for_review(run, row, tool, args, decision, standing=False)
    raise AssertionError("a departure review pauses the run")
