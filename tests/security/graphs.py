"""A LangGraph graph for the review attacks: it asks a human about one `deploy` action the way
HumanInTheLoopMiddleware does (batched `action_requests` + `review_configs`), with the
decisions its input allows, then records which command it ran."""

from __future__ import annotations

from typing import TypedDict

from langgraph.types import interrupt

from tests.durable.graphs import chain


class DeployState(TypedDict, total=False):
    command: str
    allowed: list[str]
    ran: str


def ask_then_deploy(state: DeployState) -> dict:
    answer = interrupt(
        {
            "action_requests": [
                {"name": "deploy", "args": {"command": state["command"]}, "description": "ship"}
            ],
            "review_configs": [{"action_name": "deploy", "allowed_decisions": state["allowed"]}],
        }
    )
    (decision,) = answer["decisions"]
    ran = {
        "approve": state["command"],
        "edit": (decision.get("edited_action") or {}).get("args", {}).get("command", ""),
    }.get(decision["type"], "")
    return {"ran": ran or "nothing"}


deploy = chain(DeployState, ("deploy", ask_then_deploy))
