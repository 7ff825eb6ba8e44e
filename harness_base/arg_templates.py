"""Argument templates: how `harness.yaml` derives a compensating call's arguments from the
original call (`mcp_servers.<name>.compensations`, `http.compensations`).

A template is JSON (objects, lists, strings, numbers, booleans, null). In a string,
`{{ args.project }}` or `{{ result.items.0.id }}` names a value by its path: a string that is
one placeholder and nothing else becomes the value itself (any JSON), a placeholder inside
other text is replaced by the value's text (a string, number or boolean). That is the whole
language: a path is a root (`args`, `result`, …) and keys or list indexes joined by dots —
no expressions, filters, calls or attribute access, so nothing in a template or in the values
it reads is ever executed. Everything is bounded: the template's size and depth, a path's
length, the rendered value's size. A path that does not resolve is an error naming it.

`template_check` validates a template once (configuration loading: a bad one stops start-up
naming the key); `template_render` fills it in (TemplateError names the placeholder)."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Collection
from typing import Any

MAX_TEMPLATE_CHARS = 8 * 1024
MAX_TEMPLATE_DEPTH = 8
MAX_PATH_SEGMENTS = 8
MAX_PLACEHOLDERS = 64
# A rendered template, as JSON; and each string built from text and placeholders.
MAX_RENDERED_CHARS = 64 * 1024
MAX_STRING_CHARS = 8 * 1024

# `{{`, then anything up to the nearest `}}`: what is inside is checked as a path below (the
# template is at most MAX_TEMPLATE_CHARS, and the lazy match cannot span another `{{`).
_PLACEHOLDER = re.compile(r"\{\{((?:(?!\{\{).){0,200}?)\}\}", re.DOTALL)
_SEGMENT = re.compile(r"[A-Za-z0-9_-]{1,100}")
_ROOT = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,30}")


class TemplateError(ValueError):
    """A template that is not valid, or one that cannot be filled in from these values."""


def _path(text: str, *, roots: Collection[str]) -> list[str]:
    """The segments of the path inside a placeholder (`result.items.0.id`)."""
    path = text.strip()
    segments = path.split(".")
    if (
        not path
        or not _ROOT.fullmatch(segments[0])
        or not all(_SEGMENT.fullmatch(s) for s in segments[1:])
    ):
        raise TemplateError(
            f"{{{{{text}}}}} is not a path: write a root and keys joined by dots, e.g. "
            f"{{{{ args.project }}}} (no expressions, filters or calls)"
        )
    if segments[0] not in roots:
        raise TemplateError(
            f"{{{{ {path} }}}}: unknown root {segments[0]!r} (use {', '.join(sorted(roots))})"
        )
    if len(segments) > MAX_PATH_SEGMENTS:
        raise TemplateError(f"{{{{ {path} }}}}: a path has at most {MAX_PATH_SEGMENTS} parts")
    return segments


def _placeholders(text: str, *, roots: Collection[str]) -> list[tuple[str, list[str]]]:
    found = [(m.group(0), _path(m.group(1), roots=roots)) for m in _PLACEHOLDER.finditer(text)]
    rest = _PLACEHOLDER.sub("", text)
    for token in ("{{", "}}", "{%", "%}", "{#", "#}"):
        if token in rest:
            raise TemplateError(
                f"{text[:80]!r}: {token!r} outside a placeholder (only {{{{ path }}}} is "
                "understood; there are no statements or comments)"
            )
    if len(found) > MAX_PLACEHOLDERS:
        raise TemplateError(f"more than {MAX_PLACEHOLDERS} placeholders")
    return found


def template_check(template: Any, *, roots: Collection[str]) -> None:
    """Raise TemplateError unless `template` is a valid template over these roots."""
    try:
        size = len(json.dumps(template, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise TemplateError(f"not JSON: {exc}") from None
    if size > MAX_TEMPLATE_CHARS:
        raise TemplateError(f"larger than {MAX_TEMPLATE_CHARS} characters as JSON")
    _check(template, roots=roots, depth=0)


def _check(node: Any, *, roots: Collection[str], depth: int) -> None:
    if depth > MAX_TEMPLATE_DEPTH:
        raise TemplateError(f"nested deeper than {MAX_TEMPLATE_DEPTH} levels")
    if isinstance(node, dict):
        for key, value in node.items():
            if not isinstance(key, str) or "{{" in key or "{%" in key:
                raise TemplateError(f"{key!r}: keys are plain strings, never templates")
            _check(value, roots=roots, depth=depth + 1)
    elif isinstance(node, list):
        for value in node:
            _check(value, roots=roots, depth=depth + 1)
    elif isinstance(node, str):
        _placeholders(node, roots=roots)
    elif not (node is None or isinstance(node, bool | int | float)):
        raise TemplateError(f"{type(node).__name__} is not a JSON value")


def _lookup(values: dict[str, Any], segments: list[str]) -> Any:
    """The value at a path: only dict keys and list indexes, never attributes."""
    node: Any = values
    walked: list[str] = []
    for segment in segments:
        where = ".".join(walked) or "the template's values"
        if isinstance(node, dict):
            if segment not in node:
                raise TemplateError(f"{{{{ {'.'.join(segments)} }}}}: {where} has no {segment!r}")
            node = node[segment]
        elif isinstance(node, list):
            if not segment.isdigit() or int(segment) >= len(node):
                raise TemplateError(
                    f"{{{{ {'.'.join(segments)} }}}}: {where} is a list of {len(node)}, "
                    f"no item {segment!r}"
                )
            node = node[int(segment)]
        else:
            raise TemplateError(
                f"{{{{ {'.'.join(segments)} }}}}: {where} is {_kind(node)}, not an object or list"
            )
        walked.append(segment)
    return node


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _text(value: Any, placeholder: str) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | str) or (isinstance(value, float) and math.isfinite(value)):
        return str(value)
    raise TemplateError(
        f"{placeholder}: is {_kind(value)}; only text, numbers and booleans "
        "can be put inside other text"
    )


def template_render(
    template: Any,
    *,
    values: dict[str, Any],
    escape: Callable[[str], str] | None = None,
) -> Any:
    """`template` filled in from `values` (root -> JSON). `escape` is applied to each value put
    inside other text (a URL's path segment, say). TemplateError names what failed."""
    template_check(template, roots=values.keys())
    rendered = _render(template, values=values, escape=escape)
    if len(json.dumps(rendered, default=str)) > MAX_RENDERED_CHARS:
        raise TemplateError(
            f"the filled-in template is larger than {MAX_RENDERED_CHARS} characters"
        )
    return rendered


def _render(node: Any, *, values: dict[str, Any], escape: Callable[[str], str] | None) -> Any:
    if isinstance(node, dict):
        return {key: _render(value, values=values, escape=escape) for key, value in node.items()}
    if isinstance(node, list):
        return [_render(value, values=values, escape=escape) for value in node]
    if not isinstance(node, str):
        return node
    found = _placeholders(node, roots=values.keys())
    if not found:
        return node
    if len(found) == 1 and found[0][0] == node.strip() and escape is None:
        value = _lookup(values, found[0][1])
        if len(json.dumps(value, default=str)) > MAX_RENDERED_CHARS:
            raise TemplateError(
                f"{found[0][0]}: the value is larger than {MAX_RENDERED_CHARS} characters"
            )
        return json.loads(json.dumps(value, default=str))
    parts = iter(found)

    def fill(match: re.Match[str]) -> str:
        placeholder, segments = next(parts)
        text = _text(_lookup(values, segments), placeholder)
        if len(text) > MAX_STRING_CHARS:
            raise TemplateError(
                f"{placeholder}: the value is longer than {MAX_STRING_CHARS} characters"
            )
        return escape(text) if escape is not None else text

    out = _PLACEHOLDER.sub(fill, node)
    if len(out) > MAX_STRING_CHARS:
        raise TemplateError(
            f"{node[:80]!r}: the filled-in text is longer than {MAX_STRING_CHARS} characters"
        )
    return out
