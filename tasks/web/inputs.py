"""Bounds on every request's input, before any view parses it: JSON that parses (else 400
saying where, by line and column), nested at most MAX_JSON_DEPTH deep (400), no NUL characters
in query parameters, form fields (urlencoded and multipart, file names included) or JSON
strings, and no non-finite numbers (`NaN`, `Infinity`, which Python's JSON parser accepts) in
JSON (422 naming the field). PostgreSQL cannot store NUL in text or jsonb, and recursion on
deep JSON exhausts the stack: both were 500s.

Every body is checked as what its reader parses it as: django-ninja parses an API body as JSON
whatever its Content-Type (text/plain, a form type, none), so every API body is checked as
JSON; the pages parse only form bodies."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent, TooManyFilesSent
from django.core.files.uploadedfile import UploadedFile
from django.http import HttpRequest, HttpResponse, JsonResponse, QueryDict
from django.utils.datastructures import MultiValueDict

MAX_JSON_DEPTH = 64
_BODY_METHODS = ("POST", "PUT", "PATCH", "DELETE")
# The bodies Django parses into `request.POST` / `request.FILES` for the pages' forms.
_FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")


class _NonFinite:
    """What `NaN` / `Infinity` parse to here, so the walk below can name where they were."""


# A JSON string (escapes included), unrolled so long strings match without backtracking.
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_BRACKET = re.compile(rb"[\[\]{}]")
# Worth parsing for: NUL (escaped or raw) and the bare NaN / Infinity tokens.
_SUSPICIOUS = re.compile(rb"\\u0000|\x00|NaN|Infinity")


def json_depth(raw: bytes) -> int:
    """How deep `raw` nests, without parsing it (so without recursion); strings are blanked
    first so brackets inside them do not count."""
    if raw.count(b"[") + raw.count(b"{") <= MAX_JSON_DEPTH:
        return MAX_JSON_DEPTH
    depth = deepest = 0
    for match in _BRACKET.finditer(_STRING.sub(b'""', raw)):
        depth += 1 if match.group() in (b"[", b"{") else -1
        deepest = max(deepest, depth)
    return deepest


def json_error(exc: ValueError) -> dict[str, Any]:
    """Where and why a JSON text does not parse: {"field": "body", "message": "invalid JSON at
    line 2, column 10: Expecting value", "line": 2, "column": 10}."""
    if isinstance(exc, json.JSONDecodeError):
        return {
            "field": "body",
            "message": f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}",
            "line": exc.lineno,
            "column": exc.colno,
        }
    return {"field": "body", "message": f"invalid JSON: {exc}"}  # not UTF-8, UTF-16 or -32


def _problems(value: Any, path: tuple[str, ...]) -> Iterator[tuple[str, str]]:
    if isinstance(value, _NonFinite):
        yield ".".join(path) or "body", "must be a finite number"
    elif isinstance(value, str):
        if "\x00" in value:
            yield ".".join(path) or "body", "NUL characters are not allowed"
    elif isinstance(value, dict):
        for key, item in value.items():
            if "\x00" in key:
                yield ".".join(path) or "body", "NUL characters are not allowed in keys"
            yield from _problems(item, (*path, key))
    elif isinstance(value, list):
        for position, item in enumerate(value):
            yield from _problems(item, (*path, str(position)))


def _invalid(request: HttpRequest, errors: list[dict[str, Any]], status: int) -> HttpResponse:
    detail = "invalid input" if status == 422 else errors[0]["message"]
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": detail, "errors": errors}, status=status)
    lines = "\n".join(f"{e['field']}: {e['message']}" for e in errors)
    return HttpResponse(lines, status=status, content_type="text/plain; charset=utf-8")


def _nul_fields(data: QueryDict | MultiValueDict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"field": name, "message": "NUL characters are not allowed"}
        for name, values in data.lists()
        if "\x00" in name or any("\x00" in _text(v) for v in values)
    ]


def _text(value: Any) -> str:
    return (value.name or "") if isinstance(value, UploadedFile) else value


def _json_body(request: HttpRequest, *, declared: bool) -> HttpResponse | None:
    """`declared`: the Content-Type says JSON, so a body that does not parse is a 400 here.
    Otherwise (the API parses every body as JSON, whatever its Content-Type) a body that does
    not parse is left to the operation, which may not read a body at all."""
    raw = request.body
    if json_depth(raw) > MAX_JSON_DEPTH:
        message = f"JSON nested deeper than {MAX_JSON_DEPTH} levels"
        return _invalid(request, [{"field": "body", "message": message}], 400)
    if not raw.strip():
        return None
    try:
        data = json.loads(raw, parse_constant=lambda _: _NonFinite())
    except ValueError as exc:
        return _invalid(request, [json_error(exc)], 400) if declared else None
    if _SUSPICIOUS.search(raw):
        errors = [{"field": f, "message": m} for f, m in _problems(data, ())]
        if errors:
            return _invalid(request, errors, 422)
    return None


def _over_bounds(exc: Exception) -> dict[str, Any]:
    """A form Django refuses to parse at all (its DATA_UPLOAD_* bounds): said plainly, since
    nothing of it reached the page (Django's answer was a bare 400). Going back in the browser
    keeps what was typed."""
    if isinstance(exc, TooManyFilesSent):
        what = f"more than {settings.DATA_UPLOAD_MAX_NUMBER_FILES} files"
    elif isinstance(exc, TooManyFieldsSent):
        what = f"more than {settings.DATA_UPLOAD_MAX_NUMBER_FIELDS} fields"
    else:
        what = f"more than {settings.DATA_UPLOAD_MAX_MEMORY_SIZE:,} bytes of fields"
    message = f"the form sent {what}: nothing was saved; go back to change it and send it again"
    return {"field": "body", "message": message}


class InputGuardMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        errors = _nul_fields(request.GET)
        if errors:
            return _invalid(request, errors, 422)
        if request.method in _BODY_METHODS:
            content_type = request.content_type or ""
            declared = content_type.endswith("json")
            if declared or request.path.startswith("/api/"):
                problem = _json_body(request, declared=declared)
                if problem is not None:
                    return problem
            elif content_type in _FORM_TYPES:
                try:
                    errors = _nul_fields(request.POST) + _nul_fields(request.FILES)
                except (RequestDataTooBig, TooManyFieldsSent, TooManyFilesSent) as exc:
                    return _invalid(request, [_over_bounds(exc)], 413)
                if errors:
                    return _invalid(request, errors, 422)
        return self.get_response(request)
