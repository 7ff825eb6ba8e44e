"""Patterns that do not come from the operator run in linear time (THREATS.md, issue 26): a
JSON schema's `pattern`, `patternProperties` and `additionalProperties` run on RE2
(tasks/json_schema.py), whether the schema is a task's `checks.json_schema` or an MCP tool's
`inputSchema` / `outputSchema`, so a backtracking pattern gets a verdict in microseconds
instead of holding a worker until the job's hard timeout."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tasks.models import Task, ToolCall
from tests.conftest import ROOT
from tests.factories import enqueued_task, scripted_spec
from tests.mcp.conftest import BASE_CONFIG, wait_status
from tests.mcp.server import EVIL_PATTERN
from tests.mcp.test_stdio import STDIO_CONFIG

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

# About 15 hours on Python's backtracking `re` against EVIL_PATTERN (issue 26), microseconds
# on RE2.
ATTACK = "a" * 40 + "!"


@pytest.fixture
def harness_config_text() -> str:
    return BASE_CONFIG + STDIO_CONFIG


def _attack_spec(schema: dict, answer: object) -> dict:
    return scripted_spec(
        [{"final": json.dumps(answer)}],
        checks={"json_schema": schema, "max_retries": 0},
    )


def test_backtracking_schema_patterns_get_a_verdict_and_other_tasks_still_run(
    fleet, api_client, creator
):
    """Three attacks (more than there are workers) queued ahead of an ordinary task: before,
    each pinned a worker for hours and the ordinary task never started."""
    fleet.worker(2)
    client = api_client(creator)
    attacks = [
        # The exact attack from the issue.
        _attack_spec({"type": "string", "pattern": EVIL_PATTERN}, ATTACK),
        _attack_spec(
            {
                "type": "object",
                "patternProperties": {EVIL_PATTERN: {"type": "integer"}},
                "additionalProperties": False,
            },
            {ATTACK: 1},
        ),
        _attack_spec(
            {"type": "object", "properties": {"code": {"pattern": EVIL_PATTERN}}},
            {"code": ATTACK},
        ),
    ]
    ids = []
    for spec in [*attacks, scripted_spec([{"final": "ordinary"}])]:
        response = client.post("/api/v1/tasks", spec)
        assert response.status_code == 201, response.content
        ids.append(response.json()["id"])

    *attack_ids, ordinary_id = ids
    assert wait_status(ordinary_id, "succeeded").result == "ordinary"
    for task_id in attack_ids:
        task = wait_status(task_id, "failed")
        assert task.error_class == "validation_failed"
        (checked,) = [e.payload for e in task.events.filter(type="final_checked")]
        assert not checked["passed"]
        assert "does not match" in checked["feedback"] or "do not match" in checked["feedback"]
    assert Task.objects.filter(status="succeeded").count() == 1


def test_a_schema_pattern_re2_cannot_run_is_refused_at_creation(api_client, creator):
    for schema in (
        {"type": "string", "pattern": "^(a)\\1$"},
        {"type": "object", "patternProperties": {"^(?=x)": {}}},
        # Draft 4's metaschema does not mark patternProperties' names as regexes.
        {
            "$schema": "http://json-schema.org/draft-04/schema#",
            "properties": {"x": {"patternProperties": {"^(?=x)": {}}}},
        },
        {"type": "object", "patternProperties": {"a": {}}, "unevaluatedProperties": False},
    ):
        response = api_client(creator).post(
            "/api/v1/tasks", scripted_spec([{"final": "x"}], checks={"json_schema": schema})
        )
        assert response.status_code == 422, response.content
        assert "json_schema" in response.content.decode()
    assert not Task.objects.exists()


def test_backtracking_patterns_in_an_mcp_servers_schemas_are_checked_on_re2(fleet):
    """`spell`'s inputSchema and `echo_code`'s outputSchema carry EVIL_PATTERN; `screen`'s
    a lookahead RE2 cannot run, so it is not offered."""
    fleet.worker()
    task = enqueued_task(
        [
            {"call": "local__spell", "args": {"code": ATTACK}},
            {"call": "local__echo_code", "args": {"text": ATTACK}},
            {"call": "local__spell", "args": {"code": "aaa"}},
            {"final": "done"},
        ],
        ["local__*"],
    )
    task = wait_status(task.id, "succeeded")
    first, echoed, spelled = ToolCall.objects.filter(task=task).order_by("call_id")
    # The harness checked the arguments itself and never sent them.
    assert first.status == "failed" and "does not match" in first.error_message
    assert echoed.status == "failed" and "answered unusably" in echoed.error_message
    assert spelled.status == "succeeded" and spelled.result == {"code": "aaa"}
    listed = task.events.get(type="mcp_tools_listed").payload
    assert "screen" not in [t["tool"] for t in listed["tools"]]
    (skipped,) = [s for s in listed["skipped"] if s.startswith("screen:")]
    assert "inputSchema" in skipped and "RE2" in skipped


# Every digit after a comma was a new start for the amounts alternative, each scanning the rest.
HOSTILE_OBSERVATION = "'1,' * 32000 + ' 5 USD'"


def test_fact_extraction_over_a_hostile_observation_takes_linear_time():
    """The context's fact extraction (agent/context.py) runs over every observation, which a
    tool's output or a server chooses: on Python's `re` these 64 KB took two minutes of a
    worker; on RE2, milliseconds. Run apart, so the old engine cannot pin this process."""
    code = (
        "import django; django.setup(); from agent.context import extract_facts; "
        f"print(extract_facts({HOSTILE_OBSERVATION}, constraints=False)[0][-5:])"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "harness_site.settings"},
        capture_output=True,
        text=True,
        # A hundred times what it takes (mostly Django starting), a fiftieth of what it took.
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "5 USD"
