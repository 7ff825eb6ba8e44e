"""An OpenAI Agents SDK agent for the case tests (tests/cases/test_sdk_case_openai.py), driven
by the example's scripted model (no network): it looks up a price, notifies someone, then
answers with what the tools said. Every model answer and tool run appends a line to
HARNESS_LEDGER_DIR/oa-case.log, so a test sees what ran again in a replay."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agents import Agent, RunContextWrapper, function_tool
from django.conf import settings

from examples.openai_agents_agent import ScriptedTurns, last_output


def log(line: str) -> None:
    path = Path(settings.HARNESS_LEDGER_DIR) / "oa-case.log"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as out:
        out.write(line + "\n")


def logged() -> list[str]:
    path = Path(settings.HARNESS_LEDGER_DIR) / "oa-case.log"
    return path.read_text().split() if path.exists() else []


class LoggedTurns(ScriptedTurns):
    def before_turn(self, turn: int, items: list[Any]) -> None:
        log(f"model{turn}")


@function_tool
def lookup(context: RunContextWrapper[Any], item: str) -> str:
    """The price of `item`."""
    log("lookup")
    return "42"


@function_tool
def notify(context: RunContextWrapper[Any], message: str) -> str:
    """Tell someone `message`."""
    log("notify")
    return "sent"


pricing = Agent(
    name="pricing",
    instructions="Find the widget's price.",
    model=LoggedTurns(
        [
            [("lookup", {"item": "widget"})],
            [("notify", {"message": "price noted"})],
            lambda items: f"the widget costs 42, {last_output(items)}",
        ]
    ),
    tools=[lookup, notify],
)
