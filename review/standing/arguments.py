"""Which arguments of a call a standing rule matches: all of them, each in one of three ways.

- matched by pattern: a built-in file tool's paths (`path_glob`), run_command's `command`
  (`command_regex`);
- free: a tool's payload, what it writes or sends rather than where or how it acts
  (write_file's and append_file's `content`, http_request's `body`);
- pinned: every other argument, exactly as the approved call gave it (`pinned_arguments`);
  an argument the approved call left out must be left out. So run_command's `network`,
  `timeout_s`, `env` and `cwd` and http_request's `method`, `url`, `headers` and `timeout_s`
  are the approved call's, and an argument a tool gains later is pinned too (it is not free).

An MCP tool, a tool from `HARNESS_TOOL_MODULES` or a test tool is matched on every argument
(`arguments_hash`): this module knows no payload of theirs. Left-out arguments are compared as
left out, not as the tool's defaults: a default that changes with the code never widens a rule.
"""

from __future__ import annotations

import json
from typing import Any

from tasks.paths import PATH_ARGUMENTS

COMMAND_TOOL = "run_command"
URL_TOOL = "http_request"
# The built-in file tools: their paths may be matched by a glob.
FILE_TOOLS = frozenset(
    {"read_file", "list_files", "search_text", "write_file", "append_file", "delete_file"}
)
FREE_ARGUMENTS: dict[str, tuple[str, ...]] = {
    "write_file": ("content",),
    "append_file": ("content",),
    URL_TOOL: ("body",),
}
# The arguments of the built-in tools, so a suggestion names those the call left out too.
KNOWN_ARGUMENTS: dict[str, tuple[str, ...]] = {
    COMMAND_TOOL: ("command", "network", "timeout_s", "env", "cwd"),
    URL_TOOL: ("method", "url", "headers", "body", "timeout_s"),
    "read_file": ("path", "max_bytes"),
    "list_files": ("path", "recursive", "limit"),
    "search_text": ("pattern", "path", "max_matches"),
    "write_file": ("path", "content"),
    "append_file": ("path", "content"),
    "delete_file": ("path",),
}
_SHOWN_CHARS = 80


def pattern_keys(*, path_glob: str, command_regex: str) -> tuple[str, ...]:
    """The arguments a rule matches by its pattern (the rest are free or pinned)."""
    if path_glob:
        return PATH_ARGUMENTS
    if command_regex:
        return ("command",)
    return ()


def arguments_pinned(
    *, tool: str, arguments: dict[str, Any], patterned: tuple[str, ...]
) -> dict[str, Any]:
    """The arguments of a call a rule pins: all but the patterned and the free ones."""
    free = FREE_ARGUMENTS.get(tool, ())
    return {k: v for k, v in arguments.items() if k not in patterned and k not in free}


def shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= _SHOWN_CHARS else text[: _SHOWN_CHARS - 1] + "…"


def argument_matches(
    *, tool: str, arguments: dict[str, Any], patterned: dict[str, str]
) -> list[str]:
    """What a rule made from this call matches, argument by argument (`patterned`: argument
    -> how its pattern matches it), in the tool's order: shown before remembering."""
    free = FREE_ARGUMENTS.get(tool, ())
    names = [*KNOWN_ARGUMENTS.get(tool, ()), *sorted(set(arguments) | set(patterned))]
    lines: list[str] = []
    for name in dict.fromkeys(names):
        if name in patterned:
            lines.append(f"{name}: {patterned[name]}")
        elif name in free:
            lines.append(f"{name}: any")
        elif name in arguments:
            lines.append(f"{name}: exactly {shown(arguments[name])}")
        else:
            lines.append(f"{name}: not set (a call that sets it is not covered)")
    lines.append("no other argument")
    return lines


def pinned_summary(*, tool: str, arguments: dict[str, Any], patterned: tuple[str, ...] = ()) -> str:
    """The pinned part of a suggestion's one-line description ("" when nothing is)."""
    pinned = arguments_pinned(tool=tool, arguments=arguments, patterned=patterned)
    given = [f"{k}={shown(v)}" for k, v in pinned.items()]
    unset = [
        k
        for k in KNOWN_ARGUMENTS.get(tool, ())
        if k not in arguments and k not in FREE_ARGUMENTS.get(tool, ()) and k not in patterned
    ]
    parts = [", ".join(given)] if given else []
    if unset:
        parts.append(f"{', '.join(unset)} not set")
    return f"; {'; '.join(parts)}" if parts else ""


def rule_matches(rule: Any) -> list[str]:
    """What a stored standing rule matches, argument by argument (its page)."""
    if rule.arguments_hash:
        return [f"every argument exactly as the approved call (sha256 {rule.arguments_hash[:12]}…)"]
    pinned = rule.pinned_arguments if isinstance(rule.pinned_arguments, dict) else {}
    patterned = pattern_keys(path_glob=rule.path_glob, command_regex=rule.command_regex)
    lines = []
    if rule.path_glob:
        lines.append(f"path: matches {rule.path_glob} (`*` stays within a folder)")
    if rule.command_regex:
        lines.append(f"command: matches {rule.command_regex}")
    if rule.url_origin:
        lines.append(f"url: on {rule.url_origin}")
    free = FREE_ARGUMENTS.get(rule.tool, ())
    names = [*KNOWN_ARGUMENTS.get(rule.tool, ()), *sorted(pinned)]
    for name in dict.fromkeys(names):
        if name in patterned:
            continue
        if name in free:
            lines.append(f"{name}: any")
        elif name in pinned:
            lines.append(f"{name}: exactly {shown(pinned[name])}")
        else:
            lines.append(f"{name}: not set (a call that sets it is not covered)")
    lines.append("no other argument")
    return lines
