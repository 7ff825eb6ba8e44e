from __future__ import annotations

from django import template

register = template.Library()


@register.filter
def diff_class(line: str) -> str:
    """CSS class for one line of a unified diff."""
    if line.startswith(("+++", "---")):
        return "diff-file"
    if line.startswith("@@"):
        return "diff-hunk"
    if line.startswith("+"):
        return "diff-add"
    if line.startswith("-"):
        return "diff-del"
    return ""
