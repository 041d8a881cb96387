"""CSV exports never hand a spreadsheet a formula: names from engines and gateways that start
like one are quoted; numbers, negative ones included, stay numbers."""

import csv
import io

from kvadmin.csv_export import csv_response


def test_cells_that_look_like_formulas_are_quoted() -> None:
    response = csv_response("x.csv", ("a", "b", "c"), [("=HYPERLINK(1)", "-3.5", "@pod")])
    rows = list(csv.reader(io.StringIO(response.content.decode())))
    assert rows == [["a", "b", "c"], ["'=HYPERLINK(1)", "-3.5", "'@pod"]]
    assert response["Content-Disposition"] == 'attachment; filename="x.csv"'
