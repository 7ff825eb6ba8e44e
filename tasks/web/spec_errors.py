"""A pydantic ValidationError of a task spec as the API reports bad input: one
`{"field": "budget.max_steps", "message": ...}` per problem, the field named by its path in
the spec (a discriminated union's tag included, as in `model.scripted.script.0`)."""

from __future__ import annotations

from pydantic import ValidationError


def spec_errors(exc: ValidationError, *, prefix: str = "") -> list[dict[str, str]]:
    return [
        {
            "field": prefix + ".".join(str(part) for part in error["loc"]) or "body",
            "message": error["msg"],
        }
        for error in exc.errors()
    ]
