"""CSV downloads of what a page shows (blocks, decisions): one response shape for all of them.

Pod and model names come from engines and gateways, and an export must not run anything, so
cells follow OWASP's CSV-injection rules: a cell that a spreadsheet could read as a formula gets
a leading quote (') and every cell is wrapped in double quotes. A formula is a cell starting with
= + - @ tab or CR, or such a character after a separator (, ; tab | or a line break): a
spreadsheet that splits on another separator than the file's (a `;` locale) starts a new cell
there. Numbers, negative ones included, stay numbers."""

import csv
import io
import re
from collections.abc import Iterable, Sequence

from django.http import HttpResponse

EXPORT_MAX_ROWS = 10_000
"""An export holds at most this many rows (the page says so)."""

_FORMULA = re.compile(r"(?:^|[,;\t|\r\n])\s*[=+\-@\t\r]")
"""A formula character at the start of the cell, or of a cell a separator would begin (spaces
between are skipped, as some importers trim them)."""


def _cell(value: object) -> str:
    text = "" if value is None else str(value)
    if _FORMULA.search(text) and not _number(text):
        return "'" + text
    return text


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def csv_response(
    filename: str, header: Sequence[str], rows: Iterable[Sequence[object]]
) -> HttpResponse:
    buffer = io.StringIO()
    writer = csv.writer(buffer, quoting=csv.QUOTE_ALL)
    writer.writerow(header)
    writer.writerows([_cell(value) for value in row] for row in rows)
    response = HttpResponse(buffer.getvalue(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response
