"""What a review suggests ("approve and always allow…"): the rules made from the call under
review, narrowest first, whether a review may offer any, and how long one may stand.

A standing rule is an allow that stands in for one operator's approval. So it is consulted only
for a call the policy sends to review (a `deny` is final before it is looked at), and only
where that operator's single approval would have been enough: never for a review that needs
more than one approval, never for a call of a task its own creator made under a four-eyes rule
(`forbid_creator`), never for a task whose spec asks to review every call of the tool, never
once its creator may no longer decide reviews, never while paused or after `until`.
"""

from __future__ import annotations

import glob
import posixpath
import re
from dataclasses import asdict, dataclass, field
from datetime import date, datetime, time, timedelta
from typing import Any

import httpx
from django.utils import timezone

from review.models import ReviewRequest
from review.standing.arguments import (
    COMMAND_TOOL,
    FILE_TOOLS,
    FREE_ARGUMENTS,
    URL_TOOL,
    argument_matches,
    arguments_pinned,
    pattern_keys,
    pinned_summary,
)
from tasks.canonical import canonical_hash
from tasks.paths import call_paths

# How far ahead a standing rule may end: trust is lent for a while, not for good.
MAX_DAYS = 90
DEFAULT_DAYS = 30
# After a command prefix: arguments without anything /bin/sh would read as another command,
# a redirection, a substitution or a glob (`git status && curl … | sh` is not `git status`).
_PLAIN_WORD = r"[A-Za-z0-9_./,:=@%+-]+"
_PLAIN_ARGUMENTS = r"(?: [A-Za-z0-9_./,:=@%+ -]*)?"
_REGEX_META = frozenset("\\.^$|?*+()[]{}")
CONTROL = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True)
class Suggestion:
    """One rule a review offers; `id` is a hash of its fields (the client names it, never
    sends the fields). `matches` says what it matches, argument by argument
    (review.standing.arguments)."""

    id: str
    kind: str  # path | path_glob | command | command_prefix | url | arguments
    description: str
    tool: str
    path_glob: str = ""
    command_regex: str = ""
    url_origin: str = ""
    arguments_hash: str = ""
    pinned_arguments: dict[str, Any] = field(default_factory=dict)
    matches: tuple[str, ...] = ()

    def rule_fields(self) -> dict[str, Any]:
        fields = asdict(self)
        for key in ("id", "kind", "description", "matches"):
            fields.pop(key)
        return fields


def _suggestion(
    kind: str,
    description: str,
    *,
    arguments: dict[str, Any],
    patterned: dict[str, str],
    **fields: str,
) -> Suggestion:
    tool = fields["tool"]
    keys = pattern_keys(
        path_glob=fields.get("path_glob", ""), command_regex=fields.get("command_regex", "")
    )
    pinned = (
        {}
        if fields.get("arguments_hash")
        else arguments_pinned(tool=tool, arguments=arguments, patterned=keys)
    )
    if not fields.get("arguments_hash"):
        description += pinned_summary(tool=tool, arguments=arguments, patterned=keys)
    digest = canonical_hash({"kind": kind, **fields, "pinned_arguments": pinned})[:16]
    return Suggestion(
        id=f"{kind}-{digest}",
        kind=kind,
        description=description,
        pinned_arguments=pinned,
        matches=tuple(argument_matches(tool=tool, arguments=arguments, patterned=patterned)),
        **fields,
    )


def _regex_escape(text: str) -> str:
    # RE2 and Python's re both read a backslash before punctuation as that character.
    return "".join(f"\\{char}" if char in _REGEX_META else char for char in text)


def normal_path(path: str) -> bool:
    return bool(path) and not CONTROL.search(path) and posixpath.normpath(path) == path


def _path_suggestions(tool: str, path: str, arguments: dict[str, Any]) -> list[Suggestion]:
    exact = _suggestion(
        "path",
        f"{tool} on {path}" + (" (any content)" if tool in FREE_ARGUMENTS else ""),
        arguments=arguments,
        patterned={"path": f"exactly {path}"},
        tool=tool,
        path_glob=glob.escape(path),
    )
    folder, name = posixpath.split(path)
    stem, dot, extension = name.rpartition(".")
    if not (dot and stem and extension):
        return [exact]
    pattern = posixpath.join(glob.escape(folder), f"*.{glob.escape(extension)}")
    where = f"in {folder}/" if folder else "at the top of the workspace"
    return [
        exact,
        _suggestion(
            "path_glob",
            f"{tool} on any .{extension} file {where} (not in subfolders)",
            arguments=arguments,
            patterned={"path": f"any .{extension} file {where} (not in subfolders)"},
            tool=tool,
            path_glob=pattern,
        ),
    ]


def _command_suggestions(tool: str, command: str, arguments: dict[str, Any]) -> list[Suggestion]:
    if CONTROL.search(command) or not command.strip():
        return []
    exact = _suggestion(
        "command",
        f"{tool}: exactly `{command}`",
        arguments=arguments,
        patterned={"command": f"exactly `{command}`"},
        tool=tool,
        command_regex=f"^{_regex_escape(command)}$",
    )
    words = command.split(" ")
    prefix = " ".join(words[:2] if len(words) > 2 else words[:1])
    if len(words) < 2 or not all(re.fullmatch(_PLAIN_WORD, word) for word in prefix.split(" ")):
        return [exact]
    starting = f"starting with `{prefix}` (plain arguments after it, no shell operators)"
    return [
        exact,
        _suggestion(
            "command_prefix",
            f"{tool}: commands {starting}",
            arguments=arguments,
            patterned={"command": starting},
            tool=tool,
            command_regex=f"^{_regex_escape(prefix)}{_PLAIN_ARGUMENTS}$",
        ),
    ]


def url_origin(url: Any) -> str:
    """scheme://host[:port] of an http(s) URL, lower-cased; "" when it is not one."""
    try:
        parsed = httpx.URL(str(url))
    except (httpx.InvalidURL, TypeError, ValueError):
        return ""
    if parsed.scheme not in ("http", "https") or not parsed.host:
        return ""
    port = f":{parsed.port}" if parsed.port is not None else ""
    return f"{parsed.scheme}://{parsed.host.lower()}{port}"


def suggestions(*, tool: str, arguments: dict[str, Any]) -> list[Suggestion]:
    """One or two rules for calls like this one, narrowest first; each matches every argument
    (review.standing.arguments)."""
    if tool == COMMAND_TOOL:
        command = arguments.get("command")
        return _command_suggestions(tool, command, arguments) if isinstance(command, str) else []
    if tool == URL_TOOL:
        origin = url_origin(arguments.get("url"))
        return (
            [
                _suggestion(
                    "url",
                    f"{tool} with this method to exactly this URL (any body)",
                    arguments=arguments,
                    patterned={},
                    tool=tool,
                    url_origin=origin,
                )
            ]
            if origin
            else []
        )
    paths = set(call_paths(arguments))
    if tool in FILE_TOOLS and len(paths) == 1 and normal_path(next(iter(paths))):
        return _path_suggestions(tool, next(iter(paths)), arguments)
    return [
        _suggestion(
            "arguments",
            f"{tool} with exactly these arguments",
            arguments=arguments,
            patterned={},
            tool=tool,
            arguments_hash=canonical_hash(arguments),
        )
    ]


def review_rememberable(review: ReviewRequest) -> bool:
    """A policy review one operator's approval settles; a standing rule can stand in for no
    other (see the module docstring)."""
    return (
        review.kind == "policy"
        and review.interrupt is None
        and review.approvals_required <= 1
        and not any(
            isinstance(r, dict) and r.get("source") == "task spec" for r in review.matched_rules
        )
    )


def review_suggestions(review: ReviewRequest) -> list[Suggestion]:
    """The suggestions of a review: made from the call as proposed."""
    if not review_rememberable(review) or not isinstance(review.original_arguments, dict):
        return []
    return suggestions(tool=review.tool, arguments=review.original_arguments)


def until_parse(value: Any, *, now: datetime) -> datetime:
    """`until` of a remember: an ISO date (the rule holds through that day, in the server's
    time zone) or date-time. ValueError (the message says why) when it is not in (now, now +
    MAX_DAYS]."""
    text = str(value).strip() if value is not None else ""
    moment: datetime | None = None
    try:
        day = date.fromisoformat(text)
        moment = timezone.make_aware(datetime.combine(day + timedelta(days=1), time.min))
        latest = timezone.make_aware(
            datetime.combine(timezone.localdate(now) + timedelta(days=MAX_DAYS + 1), time.min)
        )
    except ValueError:
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            raise ValueError("a date (YYYY-MM-DD) or an ISO date-time") from None
        if timezone.is_naive(moment):
            moment = timezone.make_aware(moment)
        latest = now + timedelta(days=MAX_DAYS)
    if moment <= now:
        raise ValueError("must be in the future")
    if moment > latest:
        raise ValueError(f"at most {MAX_DAYS} days ahead")
    return moment
