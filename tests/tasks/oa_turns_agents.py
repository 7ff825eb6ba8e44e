"""An OpenAI Agents SDK agent for tests/tasks/test_openai_agents_turns.py: its scripted model
records `n<i>` for 30 turns, then answers with the last output; the model's endpoint is down
the first time turn 20 is asked (the task fails; a retry goes on)."""

from __future__ import annotations

from typing import Any

from agents import Agent

from tests.durable.openai_agents import CountingModel, _answer, log_path, record

TURNS = 30
DOWN_AT = 20


class _DownOnce(CountingModel):
    def before_turn(self, turn: int, items: list[Any]) -> None:
        super().before_turn(turn, items)
        task_key = str(items[0].get("content", "")).split(":", 1)[0].removeprefix("task ")
        flag = log_path(task_key, "down")
        if turn == DOWN_AT and not flag.exists():
            flag.write_text("down once\n")
            raise ConnectionError("model endpoint down")


def noter() -> Agent:
    script: list[Any] = [[("record", {"key": f"n{i}"})] for i in range(TURNS)] + [_answer]
    return Agent(name="noter", instructions="Record.", tools=[record], model=_DownOnce(script))
