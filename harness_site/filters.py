"""Template filters every template has (registered as template builtins in settings): JSON
values shown as JSON, never as Python reprs (`{"a": false}`, not `{'a': False}`), the line
classes of a unified diff, spans of seconds in the unit that reads best, costs in dollars at a
precision that reads, and moments as `<time>` elements the browser shows in its own zone."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from typing import Any

from django import template
from django.core.serializers.json import DjangoJSONEncoder
from django.utils.html import escape, format_html
from django.utils.safestring import SafeString, mark_safe
from django.utils.timesince import timesince, timeuntil

from tasks.charts.formatting import duration_words as _duration_words

register = template.Library()


def _jsonable(value: Any) -> Any:
    """Pydantic models (agent messages, proposed calls) as their JSON; anything else as text."""
    dump = getattr(value, "model_dump", None)
    return dump(mode="json") if callable(dump) else str(value)


@register.filter
def as_json(value: Any) -> str:
    """Indented JSON, for `<pre>` blocks (arguments, rules, audit before/after)."""
    return json.dumps(value, indent=2, ensure_ascii=False, default=_jsonable)


@register.filter
def as_json_line(value: Any) -> str:
    """One-line JSON, for table cells (truncate after this filter, not before)."""
    return json.dumps(value, ensure_ascii=False, default=_jsonable)


@register.filter
def diff_lines(text: str) -> list[tuple[str, str]]:
    """A unified diff as (CSS class, line) pairs, for colouring."""
    return [(diff_class(line), line) for line in (text or "").splitlines()]


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


_UNITS = ((86400, "d"), (3600, "h"), (60, "min"))


@register.filter
def duration(seconds: float | None) -> str:
    """Seconds in the largest unit they fill: `45 s`, `12.5 min`, `3.2 h`, `2.1 d` ("—" for
    None)."""
    if seconds is None:
        return "—"
    for size, unit in _UNITS:
        if abs(seconds) >= size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds:.0f} s" if abs(seconds) >= 10 else f"{seconds:.1f} s"


@register.filter
def duration_words(seconds: float | None) -> str:
    """Seconds as a person says them: `7 min 26 s`, `4 h 1 min`, `2.4 s` ("—" for None)."""
    return "—" if seconds is None else _duration_words(float(seconds))


@register.filter
def path_breaks(value: Any) -> SafeString:
    """Text (escaped) with a line-break opportunity after each `/`: a path wraps between its
    parts, never inside a name such as `service.conf`."""
    return mark_safe(escape(str(value)).replace("/", "/<wbr>"))


# as_time styles: the UTC text a page is served with (static/harness.js rewrites it in the
# browser's zone, or the user's, with the zone's name). The relative ones keep their words and
# get the moment in that zone on hover.
_TIME_STYLES = {
    "datetime": "%Y-%m-%d %H:%M",
    "seconds": "%Y-%m-%d %H:%M:%S",
    "time": "%H:%M:%S",
    "ms": "%H:%M:%S.%f",
    "date": "%Y-%m-%d",
}
_RELATIVE: dict[str, Callable[[datetime], str]] = {
    "ago": lambda moment: f"{timesince(moment)} ago",
    "since": timesince,
    "until": timeuntil,
}


@register.filter
def as_time(moment: datetime | str | None, style: str = "datetime") -> SafeString | str:
    """`<time datetime="2026-12-02T08:14:03.120Z" title="…Z">2026-12-02 08:14 UTC</time>`:
    `style` is one of _TIME_STYLES or _RELATIVE; the title (hover) always holds the UTC moment.
    "—" for None. An ISO string is read as its moment; a naive time (RQ's) is UTC."""
    if isinstance(moment, str):
        text = moment
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            return text
    if not moment:
        return "—"
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    utc = moment.astimezone(UTC)
    iso = utc.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    if style in _RELATIVE:
        text = _RELATIVE[style](moment)
    else:
        text = utc.strftime(_TIME_STYLES.get(style, _TIME_STYLES["datetime"]))
        text = (text[:-3] if style == "ms" else text) + " UTC"
    return format_html(
        '<time datetime="{}" data-style="{}" title="{}">{}</time>', iso, style, iso, text
    )


@register.filter
def json_data(value: Any, element_id: str) -> SafeString:
    """Django's `json_script`, for the large payloads (a 1,000-step timeline is megabytes):
    the same escapes of `<`, `>` and `&`, by three `str.replace` passes, which run at memory
    speed, instead of one `str.translate`, which maps each character in Python's slow path."""
    text = json.dumps(value, cls=DjangoJSONEncoder)
    for char, escaped in _JSON_SCRIPT_ESCAPES:
        text = text.replace(char, escaped)
    return format_html(
        '<script id="{}" type="application/json">{}</script>', element_id, mark_safe(text)
    )


_JSON_SCRIPT_ESCAPES = (("&", "\\u0026"), ("<", "\\u003C"), (">", "\\u003E"))


# Below this a cost shows as "< $0.0001".
USD_SMALLEST = Decimal("0.0001")


@register.filter
def usd(value: Any) -> str:
    """A cost in dollars at a precision that reads: `$0` for nothing, `< $0.0001` for a
    fraction of that, two significant digits under a dollar (`$0.0012`, `$0.00081`, `$0.50`),
    cents from a dollar up (`$1,234.50`)."""
    try:
        amount = Decimal(str(value or 0))
    except InvalidOperation:
        return ""
    if amount == 0:
        return "$0"
    if abs(amount) < USD_SMALLEST:
        return "< $0.0001"
    if abs(amount) >= 1:
        return f"${amount:,.2f}"
    text = f"{amount:.{max(2, 1 - amount.adjusted())}f}".rstrip("0")
    return f"${text}{'0' * max(0, 2 - len(text.split('.')[1]))}"
