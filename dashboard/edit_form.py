"""Edit-then-approve as a person edits: a form built from the tool's argument schema (its
pydantic `args_model`'s JSON schema, or an MCP tool's `inputSchema`), one field per argument.

Long or multi-line strings (file content) get a multi-line monospace field with real line
breaks, short strings a one-line input, numbers a number input with the schema's bounds,
booleans a checkbox, enums a select, and only nested objects and arrays a JSON text each. The
posted fields become the arguments object here, coerced per the schema; each field's error is
kept beside it and the operator's input is rendered back. A schema this cannot render (no
properties, a combinator at the top, arguments outside its properties) falls back to one JSON
text of the whole arguments object, as before. Either way the arguments then go through
review_decide, which checks them against the tool's schema and re-applies the policy."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from django.http import QueryDict

from dashboard.edit_fields import ABSENT, EditField, edit_fields
from tasks.web.inputs import MAX_JSON_DEPTH, json_depth, json_error

_INTEGER = re.compile(r"[+-]?\d{1,40}")


@dataclass
class EditState:
    """The edit form as shown or posted: `mode` "form" (fields) or "json" (the fallback:
    `arguments_text`); `arguments` once the post built them without errors."""

    mode: str
    fields: list[EditField] = field(default_factory=list)
    arguments_text: str = ""
    comment: str = ""
    arguments: dict[str, Any] | None = None
    errors: list[dict[str, str]] = field(default_factory=list)
    error: str = ""
    # The effect of the edited call (review.services.edit_preview), once previewed.
    preview: str | None = None
    # The tool's argument schema as text, shown beside the JSON fallback.
    schema_text: str = ""

    def _field_of(self, error: dict[str, str]) -> EditField | None:
        parts = error.get("field", "").split(".")
        if len(parts) < 2 or parts[0] != "arguments":
            return None
        return next((f for f in self.fields if f.name == parts[1]), None)

    def errors_add(self, errors: list[dict[str, str]]) -> None:
        """Errors of the arguments (`arguments.<name>...`), each shown beside its field."""
        for error in errors:
            target = self._field_of(error)
            if target is not None and not target.error:
                target.error = error["message"]
        self.errors = [*self.errors, *errors]

    @property
    def loose_errors(self) -> list[dict[str, str]]:
        """The errors no field shows (the whole object's, the policy's, the JSON text's)."""
        return [e for e in self.errors if self._field_of(e) is None]


def _empty(f: EditField) -> Any:
    """An empty input: null where the argument was null, absent where it may be, else an error."""
    if f.nullable and f.present and f.initial is None:
        return None
    if not f.required:
        return ABSENT
    raise ValueError("required")


def _text(f: EditField, raw: str) -> Any:
    # Browsers send a multi-line field's line breaks as CRLF: they become LF unless the
    # argument already used CRLF.
    if not (isinstance(f.initial, str) and "\r\n" in f.initial):
        raw = raw.replace("\r\n", "\n")
    if raw == "" and not (f.present and isinstance(f.initial, str)):
        return "" if f.required else _empty(f)
    return raw


def _number(f: EditField, raw: str) -> Any:
    text = raw.strip()
    if not text:
        return _empty(f)
    if _INTEGER.fullmatch(text):
        return int(text)
    if f.kind == "integer":
        raise ValueError("must be a whole number")
    try:
        number = float(text) if len(text) <= 100 else float("nan")
    except ValueError:
        raise ValueError("must be a number") from None
    if number != number or number in (float("inf"), float("-inf")):
        raise ValueError("must be a finite number")
    return number


def _json(f: EditField, raw: str) -> Any:
    text = raw.strip()
    if not text:
        return _empty(f)
    if json_depth(text.encode()) > MAX_JSON_DEPTH:
        raise ValueError(f"must be JSON nested at most {MAX_JSON_DEPTH} deep")

    def refuse(constant: str) -> Any:
        raise ValueError(f"{constant} is not a JSON number")

    try:
        return json.loads(text, parse_constant=refuse)
    except json.JSONDecodeError as exc:
        raise ValueError(f"must be valid JSON: {json_error(exc)['message']}") from None


def _coerce(f: EditField, data: QueryDict) -> Any:
    raw = data.get(f.input_name, "")
    if f.kind == "boolean":
        f.value = f.input_name in data
        if f.present and f.initial is None and not f.value:
            return None  # a null left unticked stays null
        default = f.default if f.default is not ABSENT else False
        return ABSENT if not f.present and f.value == default else f.value
    f.value = raw
    if f.kind in ("text", "string"):
        f.value = _text(f, raw)
        return f.value
    if f.kind in ("integer", "number"):
        return _number(f, raw)
    if f.kind == "enum":
        if raw == "":
            return _empty(f)
        if raw not in [value for value, _label in f.choices]:
            raise ValueError("is not one of the choices")
        return json.loads(raw)
    return _json(f, raw)


def edit_initial(*, schema: Any, arguments: dict[str, Any], json_only: bool = False) -> EditState:
    """The edit form for the arguments under review: fields from the schema, else JSON."""
    fields = None if json_only else edit_fields(schema=schema, arguments=arguments)
    text = json.dumps(arguments, indent=2, ensure_ascii=False)
    schema_text = json.dumps(schema, indent=2) if schema and fields is None else ""
    return EditState(
        schema_text=schema_text,
        mode="json" if fields is None else "form",
        fields=fields or [],
        arguments_text=text,
    )


def edit_bind(
    *, schema: Any, arguments: dict[str, Any], data: QueryDict, json_only: bool = False
) -> EditState:
    """The arguments object an edit form posted (`data`), built from its fields coerced per
    the schema (`edit_mode=form`) or parsed from its JSON text; errors name their fields
    (`arguments.<name>`) and every input is kept to be shown again."""
    state = edit_initial(schema=schema, arguments=arguments, json_only=json_only)
    state.comment = data.get("comment", "")
    if data.get("edit_mode") != "form" or state.mode != "form":
        state.mode, state.fields = "json", []
        state.arguments_text = data.get("arguments", "")
        try:
            state.arguments = json.loads(state.arguments_text)
        except ValueError as exc:
            state.error = "The arguments must be valid JSON."
            state.errors = [{**json_error(exc), "field": "arguments"}]
        return state
    built: dict[str, Any] = {}
    errors = []
    for f in state.fields:
        try:
            value = _coerce(f, data)
        except ValueError as exc:
            errors.append({"field": f"arguments.{f.name}", "message": str(exc)})
            continue
        if value is not ABSENT:
            built[f.name] = value
    if errors:
        state.error = "Some arguments are not valid: see the marked fields."
        state.errors_add(errors)
    else:
        state.arguments = built
    return state
