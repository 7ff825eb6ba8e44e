"""The fields of the review page's edit form (dashboard.edit_form), drawn from a tool's
argument schema: its pydantic `args_model`'s JSON schema or an MCP tool's `inputSchema`. One
field per property, its kind from the property's type: `text` (a multi-line field) for long,
multi-line or so-declared strings, `string` for short ones, `integer` / `number` with their
bounds, `boolean`, `enum` (a select), and `json` for nested objects, arrays and anything else.
A schema it cannot draw gives None (the form falls back to JSON)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

FIELD_PREFIX = "arg."
MAX_FIELDS = 50
# A string is edited in a multi-line field when its value has a line break or is longer than
# this, when the schema declares it multi-line, or allows more than LONG_MAX_LENGTH
# characters (file content, request bodies).
SHORT_CHARS = 200
LONG_MAX_LENGTH = 10_000
# An argument left out of the arguments object (not null).
ABSENT = object()


@dataclass
class EditField:
    """One argument's field: `kind` is text (multi-line), string, integer, number, boolean,
    enum or json; `value` is what it shows (text, or a bool for a checkbox)."""

    name: str
    kind: str
    required: bool
    nullable: bool
    present: bool
    initial: Any
    value: Any
    default: Any = ABSENT
    description: str = ""
    # enum: (option value: the choice as JSON, label)
    choices: list[tuple[str, str]] = field(default_factory=list)
    # number inputs: min, max, step; strings: maxlength
    attrs: dict[str, Any] = field(default_factory=dict)
    error: str = ""

    @property
    def input_name(self) -> str:
        return FIELD_PREFIX + self.name

    @property
    def rows(self) -> int:
        return min(max(str(self.value).count("\n") + 2, 6), 40)


def _resolved(schema: dict[str, Any], prop: Any) -> dict[str, Any] | None:
    """`prop` with a local `$ref` (pydantic's `$defs`) followed once; None if it cannot be."""
    if not isinstance(prop, dict):
        return None
    ref = prop.get("$ref")
    if ref is None:
        return prop
    parts = ref.split("/") if isinstance(ref, str) else []
    if len(parts) != 3 or parts[0] != "#" or not isinstance(schema.get(parts[1]), dict):
        return None
    target = schema[parts[1]].get(parts[2])
    if not isinstance(target, dict) or "$ref" in target:
        return None
    return {**target, **{k: v for k, v in prop.items() if k != "$ref"}}


def _typed(schema: dict[str, Any], prop: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """(the property's one non-null alternative, whether null is allowed): `X | None` is
    `anyOf: [X, {"type": "null"}]` in pydantic and `type: [X, "null"]` in JSON schema."""
    options = prop.get("anyOf") or prop.get("oneOf")
    if isinstance(options, list):
        rest = [o for o in options if o != {"type": "null"}]
        nullable = len(rest) < len(options)
        if len(rest) != 1:
            return {}, nullable
        inner = _resolved(schema, rest[0]) or {}
        return {**{k: v for k, v in prop.items() if k not in ("anyOf", "oneOf")}, **inner}, nullable
    types = prop.get("type")
    if isinstance(types, list):
        rest = [t for t in types if t != "null"]
        return ({**prop, "type": rest[0]} if len(rest) == 1 else {}), len(rest) < len(types)
    return prop, False


def _long(prop: dict[str, Any], value: Any) -> bool:
    if prop.get("format") in ("textarea", "multiline") or prop.get("x-multiline") is True:
        return True
    if "contentMediaType" in prop:
        return True
    max_length = prop.get("maxLength")
    if isinstance(max_length, int) and max_length > LONG_MAX_LENGTH:
        return True
    return isinstance(value, str) and ("\n" in value or "\r" in value or len(value) > SHORT_CHARS)


_SCALAR_KINDS = {"boolean": "boolean", "integer": "integer", "number": "number"}


def _kind(prop: dict[str, Any], value: Any) -> str:
    enum = [prop["const"]] if "const" in prop else prop.get("enum")
    if isinstance(enum, list) and enum and all(isinstance(v, str | int | float) for v in enum):
        return "enum"
    declared = prop.get("type")
    # A `type` that is not a name (a list left after _typed, a malformed object) draws as JSON.
    kind = _SCALAR_KINDS.get(declared) if isinstance(declared, str) else None
    if kind is not None:
        return kind
    if declared == "string":
        return "text" if _long(prop, value) else "string"
    return "json"


def _shown(kind: str, value: Any, present: bool, default: Any) -> Any:
    """What the field shows for the argument's value."""
    if kind == "boolean":
        return bool(value) if present else default is True
    if kind == "enum":  # an absent argument stays absent ("(not set)"), not its default
        return json.dumps(value) if present else ""
    if not present or value is None:
        return ""
    if kind == "json":
        return json.dumps(value, indent=2, ensure_ascii=False)
    return value if isinstance(value, str) else json.dumps(value)


def _field(
    schema: dict[str, Any], name: str, prop: Any, arguments: dict[str, Any]
) -> EditField | None:
    resolved = _resolved(schema, prop)
    if resolved is None:
        return None
    typed, nullable = _typed(schema, resolved)
    present = name in arguments
    value = arguments.get(name)
    kind = _kind(typed, value) if typed else "json"
    default = typed.get("default", resolved.get("default", ABSENT))
    required = name in (schema.get("required") or [])
    made = EditField(
        name=name,
        kind=kind,
        required=required,
        nullable=nullable,
        present=present,
        initial=value,
        value=_shown(kind, value, present, default),
        default=default,
        description=str(typed.get("description") or resolved.get("description") or "")[:500],
    )
    if kind == "enum":
        enum = [typed["const"]] if "const" in typed else typed["enum"]
        made.choices = [(json.dumps(v), str(v)) for v in enum]
        if nullable:
            made.choices.append(("null", "(null)"))
        if not required:
            unset = "(not set)" if default is ABSENT else f"(not set: {default})"
            made.choices.insert(0, ("", unset))
    elif kind in ("integer", "number"):
        made.attrs = {
            "min": typed.get("minimum", typed.get("exclusiveMinimum")),
            "max": typed.get("maximum", typed.get("exclusiveMaximum")),
            "step": "1" if kind == "integer" else "any",
        }
    elif kind == "string" and isinstance(typed.get("maxLength"), int):
        made.attrs = {"maxlength": typed["maxLength"]}
    return made


def edit_fields(*, schema: Any, arguments: dict[str, Any]) -> list[EditField] | None:
    """One field per property of the tool's argument schema, showing `arguments`; None when
    the schema cannot be rendered as a form (the JSON fallback is used instead)."""
    if not isinstance(schema, dict) or schema.get("type", "object") != "object":
        return None
    properties = schema.get("properties")
    if not isinstance(properties, dict) or not 0 < len(properties) <= MAX_FIELDS:
        return None
    if any(key in schema for key in ("allOf", "anyOf", "oneOf", "not", "if", "$ref")):
        return None
    if any(name not in properties for name in arguments):
        return None
    fields = [_field(schema, str(name), prop, arguments) for name, prop in properties.items()]
    drawn = [f for f in fields if f is not None]
    return drawn if len(drawn) == len(fields) else None
