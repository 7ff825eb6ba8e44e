"""The edit form drawn from argument schemas as MCP servers and pydantic write them
(dashboard.edit_fields), and posted fields built back into arguments (dashboard.edit_form)."""

from __future__ import annotations

import enum
import json

from django.http import QueryDict
from pydantic import BaseModel

from dashboard.edit_fields import edit_fields
from dashboard.edit_form import edit_bind

MCP_SCHEMA = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "description": "what to look for"},
        "limit": {"type": "integer", "minimum": 1, "maximum": 50},
        "mode": {"enum": ["fast", "thorough"]},
        "filters": {"type": "object"},
        "verbose": {"type": ["boolean", "null"]},
        "notes": {"type": "string", "x-multiline": True},
    },
    "required": ["query"],
}


def posted(**fields: str) -> QueryDict:
    data = QueryDict(mutable=True)
    data["edit_mode"] = "form"
    for name, value in fields.items():
        data[f"arg.{name}"] = value
    return data


def test_an_mcp_input_schema_is_drawn_field_by_field():
    fields = edit_fields(schema=MCP_SCHEMA, arguments={"query": "cats", "limit": 5})
    assert [(f.name, f.kind) for f in fields] == [
        ("query", "string"),
        ("limit", "integer"),
        ("mode", "enum"),
        ("filters", "json"),
        ("verbose", "boolean"),
        ("notes", "text"),
    ]
    limit = fields[1]
    assert limit.value == "5" and limit.attrs == {"min": 1, "max": 50, "step": "1"}
    assert fields[2].choices == [("", "(not set)"), ('"fast"', "fast"), ('"thorough"', "thorough")]


def test_fields_left_as_drawn_give_back_the_arguments_exactly():
    arguments = {
        "query": "line one\nline two",
        "limit": 5,
        "filters": {"tag": ["a", 1.5]},
        "verbose": None,
    }
    fields = edit_fields(schema=MCP_SCHEMA, arguments=arguments)
    data = posted(**{f.name: f.value for f in fields if f.kind != "boolean"})
    state = edit_bind(schema=MCP_SCHEMA, arguments=arguments, data=data)
    assert state.errors == [] and state.arguments == arguments


def test_posted_fields_are_coerced_and_bad_ones_named():
    arguments = {"query": "cats"}
    good = posted(query="dogs", limit="7", mode='"thorough"', filters='{"a": [1]}', verbose="true")
    state = edit_bind(schema=MCP_SCHEMA, arguments=arguments, data=good)
    assert state.arguments == {
        "query": "dogs",
        "limit": 7,
        "mode": "thorough",
        "filters": {"a": [1]},
        "verbose": True,
    }
    bad = posted(query="dogs", limit="7.5", mode='"nope"', filters="NaN", notes="x")
    state = edit_bind(schema=MCP_SCHEMA, arguments=arguments, data=bad)
    assert state.arguments is None
    assert [e["field"] for e in state.errors] == [
        "arguments.limit",
        "arguments.mode",
        "arguments.filters",
    ]
    by_name = {f.name: f for f in state.fields}
    assert by_name["limit"].value == "7.5" and by_name["limit"].error == "must be a whole number"
    deep = posted(query="x", filters="[" * 100 + "]" * 100)
    state = edit_bind(schema=MCP_SCHEMA, arguments=arguments, data=deep)
    assert [e["field"] for e in state.errors] == ["arguments.filters"]


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Paint(BaseModel):
    colour: Colour
    coats: float | None = None


def test_a_pydantic_enum_behind_a_ref_is_a_select_and_an_optional_number_may_stay_absent():
    schema = Paint.model_json_schema()
    fields = edit_fields(schema=schema, arguments={"colour": "red"})
    assert [(f.name, f.kind) for f in fields] == [("colour", "enum"), ("coats", "number")]
    state = edit_bind(
        schema=schema, arguments={"colour": "red"}, data=posted(colour='"blue"', coats="")
    )
    assert state.arguments == {"colour": "blue"}


def test_schemas_that_cannot_be_drawn_fall_back_to_json():
    assert edit_fields(schema=MCP_SCHEMA, arguments={"query": "x", "extra": 1}) is None
    assert edit_fields(schema={"type": "object"}, arguments={}) is None
    assert edit_fields(schema={"anyOf": [MCP_SCHEMA]}, arguments={}) is None
    state = edit_bind(
        schema=None, arguments={"a": 1}, data=QueryDict("arguments=" + json.dumps({"a": 2}))
    )
    assert state.mode == "json" and state.arguments == {"a": 2}


def test_a_property_whose_type_is_not_a_name_is_a_json_field():
    # An MCP server's schema is foreign: a malformed `type` (an object) drew a TypeError
    # (an unhashable dictionary key) instead of a field.
    schema = {"type": "object", "properties": {"q": {"type": {"kind": "string"}}}}
    fields = edit_fields(schema=schema, arguments={"q": "x"})
    assert [(f.name, f.kind) for f in fields] == [("q", "json")]
