"""CSV downloads of what a page shows (blocks, decisions): one response shape for all of them.

Cells that a spreadsheet would read as a formula (starting with = + - @) get a leading quote:
pod and model names come from engines and gateways, and an export must not run anything."""

import csv
import io
from collections.abc import Iterable, Sequence

from django.http import HttpResponse

EXPORT_MAX_ROWS = 10_000
"""An export holds at most this many rows (the page says so)."""

_FORMULA = ("=", "+", "-", "@", "\t", "\r")


def _cell(value: object) -> str:
    text = "" if value is None else str(value)
    if text.startswith(_FORMULA) and not _number(text):
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
    writer = csv.writer(buffer)
    writer.writerow(header)
    writer.writerows([_cell(value) for value in row] for row in rows)
    response = HttpResponse(buffer.getvalue(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response
