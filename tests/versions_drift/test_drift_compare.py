"""tasks.drift: what changed between two `versions` records, and whether it touches what the
task does next (issue #43)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from harness_base.config import HarnessConfig
from tasks.drift import drift

OLD_SCHEMA = {
    "type": "object",
    "properties": {"title": {"type": "string"}},
    "required": ["title"],
}
NEW_SCHEMA = {
    "type": "object",
    "properties": {"title": {"type": "string"}, "priority": {"type": "integer"}},
    "required": ["title", "priority"],
}
BODIES = {
    "t1": OLD_SCHEMA,
    "t2": NEW_SCHEMA,
    "g1": {"nodes": ["plan", "review", "act"], "edges": [["plan", "review"], ["review", "act"]]},
    "g2": {"nodes": ["plan", "check", "act"], "edges": [["plan", "check"], ["check", "act"]]},
    "m1": {"tools": [{"name": "add", "inputSchema": OLD_SCHEMA}, {"name": "list"}]},
    "m2": {"tools": [{"name": "add", "inputSchema": OLD_SCHEMA}, {"name": "list", "x": 1}]},
    "m3": {"tools": [{"name": "add", "inputSchema": NEW_SCHEMA}]},
}


def versions(**over):
    base = {
        "harness": {"version": "1"},
        "spec": "s",
        "tools": {"open_ticket": "t1", "read_file": "r"},
        "mcp": {"notes": "m1"},
        "policy": "p1",
    }
    return {**base, **over}


def test_no_old_versions_is_no_drift():
    assert not drift({}, versions(), {"tool": "open_ticket"}).any


def test_a_required_field_added_to_the_pending_tool_touches_it_and_names_the_field():
    found = drift(
        versions(),
        versions(tools={"open_ticket": "t2", "read_file": "r"}),
        {"tool": "open_ticket", "arguments": {"title": "API down"}},
        bodies=BODIES.get,
    )
    assert found.touches_next
    (change,) = found.changes
    assert (change.kind, change.name, change.required) == ("tool", "open_ticket", ["priority"])
    assert change.old_body == OLD_SCHEMA and change.new_body == NEW_SCHEMA
    assert found.arguments_valid is False
    assert found.argument_errors == [{"field": "arguments.priority", "message": "Field required"}]
    assert found.as_json()["schema"] == NEW_SCHEMA


def test_another_tool_or_the_policy_changing_is_harmless_but_recorded():
    found = drift(
        versions(),
        versions(tools={"open_ticket": "t1", "read_file": "r2"}, policy="p2"),
        {"tool": "open_ticket", "arguments": {"title": "x"}},
        bodies=BODIES.get,
    )
    assert not found.touches_next
    assert found.summary() == ["tool read_file changed", "policy changed"]


def test_the_pending_tool_gone_touches_it():
    found = drift(
        versions(), versions(tools={"read_file": "r"}), {"tool": "open_ticket", "arguments": {}}
    )
    assert found.touches == ["the pending call's tool open_ticket is gone"]
    assert found.tool_gone


def test_an_mcp_server_list_change_touches_only_the_tool_whose_schema_changed():
    other = drift(
        versions(), versions(mcp={"notes": "m2"}), {"tool": "notes__add"}, bodies=BODIES.get
    )
    assert other.any and not other.touches_next
    mine = drift(
        versions(),
        versions(mcp={"notes": "m3"}),
        {"tool": "notes__add", "arguments": {"title": "a"}},
        bodies=BODIES.get,
    )
    assert mine.touches_next and mine.arguments_valid is False
    gone = drift(
        versions(), versions(mcp={"notes": "m3"}), {"tool": "notes__list"}, bodies=BODIES.get
    )
    assert gone.tool_gone


def test_a_graph_whose_next_node_was_renamed_touches_it_and_lists_the_nodes():
    found = drift(versions(graph="g1"), versions(graph="g2"), {"node": "review"}, bodies=BODIES.get)
    assert found.touches == ["the graph's next node review is gone"]
    (change,) = found.changes
    assert (change.added, change.removed) == (["check"], ["review"])
    assert (
        not drift(
            versions(graph="g1"), versions(graph="g2"), {"node": "plan"}, bodies=BODIES.get
        ).touches
        == []
    )


def test_an_sdk_agent_definition_change_touches_its_next_turn():
    found = drift(versions(agent="a1"), versions(agent="a2"), {"agent": True})
    assert found.touches == ["the agent's definition changed"]


def test_migrations_config_names_a_function_and_a_bad_one_is_a_clear_error():
    config = HarnessConfig.model_validate(
        {"migrations": {"add-priority": "myteam.migrations:add_priority"}}
    )
    assert "add-priority" in config.migrations
    with pytest.raises(ValidationError, match="migrations"):
        HarnessConfig.model_validate({"migrations": {"x": "not a path"}})
