"""JSON Schema for schemas the harness does not write: a task's `checks.json_schema` and an MCP
tool's `inputSchema` and `outputSchema` (THREATS.md: patterns from a spec, a model or a server
must run in linear time).

jsonschema runs `pattern`, `patternProperties` and `additionalProperties` (which looks at the
`patternProperties` next to it) on Python's backtracking `re`, where `^(a+)+$` against
`"aaa…a!"` takes hours. The validators here are jsonschema's, for the draft a schema names,
with those keywords on RE2 (`compile_pattern`), and the metaschema's `regex` format accepting
only what RE2 compiles, so `json_schema_check` refuses a pattern RE2 cannot run
(backreferences, lookaround). `unevaluatedProperties` cannot be combined with
`patternProperties`: jsonschema matches those patterns on `re` deep inside its evaluation of
`unevaluatedProperties`, which no keyword here can replace, so such a schema is refused.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Iterator
from typing import Any

import jsonschema
from jsonschema.exceptions import ValidationError
from jsonschema.protocols import Validator
from referencing import Registry

from harness_base.config import compile_pattern


def _compiled(pattern: str) -> tuple[Any, str | None]:
    """(the RE2 pattern, None) or (None, why it cannot be used)."""
    try:
        return compile_pattern(pattern), None
    except ValueError as exc:
        return None, f"the pattern {pattern[:200]!r} cannot be used: {exc}"


def _pattern(validator: Any, pattern: str, instance: Any, schema: dict[str, Any]) -> Iterator[Any]:
    if not validator.is_type(instance, "string"):
        return
    compiled, problem = _compiled(pattern)
    if problem is not None:
        yield ValidationError(problem)
    elif compiled.search(instance) is None:
        yield ValidationError(f"{instance[:200]!r} does not match {pattern[:200]!r}")


def _pattern_properties(
    validator: Any, patterns: dict[str, Any], instance: Any, schema: dict[str, Any]
) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        compiled, problem = _compiled(pattern)
        if problem is not None:
            yield ValidationError(problem)
            continue
        for key, value in instance.items():
            if compiled.search(key) is not None:
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(
    validator: Any, additional: Any, instance: Any, schema: dict[str, Any]
) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    patterns = [_compiled(p)[0] for p in schema.get("patternProperties", {})]
    if None in patterns:
        # `patternProperties` reports the pattern; which keys are extra cannot be known.
        return
    properties = schema.get("properties", {})
    extras = sorted(
        (
            key
            for key in instance
            if key not in properties and not any(p.search(key) for p in patterns)
        ),
        key=str,
    )
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif not additional and extras:
        # jsonschema's own messages.
        listed = ", ".join(repr(str(extra)[:200]) for extra in extras[:20])
        if patterns:
            verb = "does" if len(extras) == 1 else "do"
            regexes = ", ".join(repr(p) for p in sorted(schema["patternProperties"]))
            yield ValidationError(f"{listed} {verb} not match any of the regexes: {regexes}")
        else:
            verb = "was" if len(extras) == 1 else "were"
            yield ValidationError(
                f"Additional properties are not allowed ({listed} {verb} unexpected)"
            )


def _is_re2(instance: object) -> bool:
    if isinstance(instance, str):
        compile_pattern(instance)
    return True


@functools.cache
def _re2_class(base: type[Validator]) -> type[Validator]:
    keywords = {
        "pattern": _pattern,
        "patternProperties": _pattern_properties,
        "additionalProperties": _additional_properties,
    }
    checker = copy.copy(base.FORMAT_CHECKER)
    checker.checkers = dict(checker.checkers)
    checker.checks("regex", raises=ValueError)(_is_re2)
    extended: type[Validator] = jsonschema.validators.extend(
        base,
        validators={k: v for k, v in keywords.items() if k in base.VALIDATORS},
        format_checker=checker,
    )
    return extended


def _objects(schema: Any, where: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """(place, object) for every JSON object in the schema, itself included."""
    if isinstance(schema, dict):
        yield where, schema
        for key, value in schema.items():
            yield from _objects(value, f"{where}.{key}" if where else str(key))
    elif isinstance(schema, list):
        for index, item in enumerate(schema):
            yield from _objects(item, f"{where}[{index}]")


def _validator_class(schema: Any) -> type[Validator]:
    keys = {key for _where, value in _objects(schema) for key in value}
    if {"unevaluatedProperties", "patternProperties"} <= keys:
        raise ValueError(
            "unevaluatedProperties cannot be combined with patternProperties in one schema "
            "(patterns run on RE2)"
        )
    return _re2_class(jsonschema.validators.validator_for(schema))


def json_schema_check(*, schema: Any) -> None:
    """A ValueError naming the place in the schema unless it is a valid JSON Schema whose
    patterns all compile on RE2."""
    validator_cls = _validator_class(schema)
    try:
        # types-jsonschema's Validator.check_schema lacks format_checker (jsonschema has it).
        validator_cls.check_schema(schema, format_checker=validator_cls.FORMAT_CHECKER)  # type: ignore[call-arg]
    except jsonschema.SchemaError as exc:
        where = exc.json_path.removeprefix("$").removeprefix(".") or "(top level)"
        because = f": {exc.cause}" if exc.cause is not None else ""
        raise ValueError(f"invalid JSON schema at {where}: {exc.message[:300]}{because}") from None
    # The metaschemas of drafts 3 and 4 do not mark patternProperties' names as regexes.
    for where, value in _objects(schema):
        patterns = value.get("patternProperties")
        for pattern in patterns if isinstance(patterns, dict) else ():
            problem = _compiled(pattern)[1]
            if problem is not None:
                place = f"{where}.patternProperties" if where else "patternProperties"
                raise ValueError(f"invalid JSON schema at {place}: {problem}")


def json_schema_validator(*, schema: Any) -> Validator:
    """A validator for `schema` (checked with `json_schema_check`) with its patterns on RE2;
    `$ref`s resolve within the schema (and to the published metaschemas), never over the
    network."""
    return _validator_class(schema)(schema, registry=Registry())
