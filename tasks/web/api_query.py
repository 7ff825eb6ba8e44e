"""Unknown query parameters are refused: a GET operation answers 422 naming every parameter
it does not declare, instead of ignoring it. A misspelt or unsupported filter that is ignored
returns an unfiltered list, and an operator once approved another task's review from one.

Applied to every operation of the API at once (`api.add_decorator(refuse_unknown_query,
mode="operation")` in harness_site/api.py), so an endpoint added later cannot forget it. It runs
after authentication and the declared parameters' own validation (ninja's "operation" mode
wraps the view function), so a caller without credentials still gets 401 and a bad value of a
known parameter its usual 422."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from django.http import HttpRequest
from ninja.errors import ValidationError

UNKNOWN = "unknown query parameter"


def declared_query_names(operation: Any) -> frozenset[str]:
    """The query parameter names an operation declares (as the OpenAPI schema lists them):
    plain parameters and the fields of `Query[Schema]` ones, pagination's included."""
    names: set[str] = set()
    for model in operation.models:
        if model.__ninja_param_source__ != "query":
            continue
        flatten = getattr(model, "__ninja_flatten_map__", None)
        if flatten:
            names.update(flatten)
        else:
            names.update(field.alias or name for name, field in model.model_fields.items())
    return frozenset(names)


def refuse_unknown_query(view_func: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap a GET operation's view so that a query parameter it does not declare is a 422
    `{"detail": "invalid input", "errors": [{"field": NAME, "message": UNKNOWN}]}`; other
    methods are left as they are."""
    operation = view_func._ninja_operation  # type: ignore[attr-defined]  # set by ninja's router
    if "GET" not in operation.methods:
        return view_func
    known = declared_query_names(operation)

    @functools.wraps(view_func)
    def checked(request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
        unknown = sorted(set(request.GET) - known)
        if unknown:
            raise ValidationError([{"loc": ("query", name), "msg": UNKNOWN} for name in unknown])
        return view_func(request, *args, **kwargs)

    return checked
