"""CSV downloads. Every export writes through `csv_response`, which neutralises formula cells:
a spreadsheet opening the file runs a cell that starts with `=`, `+`, `-`, `@`, a tab or a
carriage return as a formula, and these files carry text from models, tools and MCP servers
(tool names, error messages) that an attacker can choose."""

from __future__ import annotations

import csv
from collections.abc import Iterable, Sequence

from django.http import HttpResponse

# OWASP's list of the characters a spreadsheet reads as the start of a formula.
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: object) -> object:
    """A value as a cell: dates in ISO 8601; a string that would start a formula gets a
    leading `'`, which spreadsheets read as "this is text" (OWASP). Numbers stay numbers, so a
    negative count is still a number."""
    if hasattr(value, "isoformat"):
        value = value.isoformat()
    if isinstance(value, str) and value.startswith(FORMULA_START):
        return "'" + value
    return value


def csv_response(
    *, filename: str, header: Sequence[str], rows: Iterable[Sequence[object]]
) -> HttpResponse:
    """An attachment `filename` with the `header` row, then `rows`, every cell through
    `csv_cell`."""
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    writer = csv.writer(response)
    writer.writerow([csv_cell(name) for name in header])
    writer.writerows([csv_cell(value) for value in row] for row in rows)
    return response
