"""Helpers shared by the API routers."""

from __future__ import annotations

import json
from typing import TypeVar

from django.http import HttpRequest
from ninja.errors import HttpError
from pydantic import BaseModel, ValidationError

M = TypeVar("M", bound=BaseModel)


def optional_body(request: HttpRequest, model: type[M]) -> M:
    """An action endpoint's JSON body where every field has a default: an empty body is fine,
    malformed JSON is a 400 and invalid fields a 422 naming them."""
    raw = request.body.strip()
    data: object = {}
    if raw:
        try:
            data = json.loads(raw)
        except ValueError:
            raise HttpError(400, "the request body must be JSON") from None
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        fields = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'body'}: {e['msg']}" for e in exc.errors()
        )
        raise HttpError(422, f"invalid input: {fields}") from None
