"""CSV exports never hand a spreadsheet a formula (OWASP's CSV-injection rules): names from
engines and gateways that start like one, or hold one after a separator, are prefixed; every
cell is quoted; numbers, negative ones included, stay numbers."""

import csv
import io

import pytest

from kvadmin.csv_export import csv_response


def _rows(response) -> list[list[str]]:
    return list(csv.reader(io.StringIO(response.content.decode())))


def test_cells_that_look_like_formulas_are_quoted() -> None:
    response = csv_response("x.csv", ("a", "b", "c"), [("=HYPERLINK(1)", "-3.5", "@pod")])
    assert _rows(response) == [["a", "b", "c"], ["'=HYPERLINK(1)", "-3.5", "'@pod"]]
    assert response["Content-Disposition"] == 'attachment; filename="x.csv"'


@pytest.mark.parametrize(
    "cell",
    [
        "x;=1+1",
        "x,=1+1",
        "x|@SUM(A1)",
        "x\t+1",
        "x\n-1+cmd",
        "x\r=1",
        "x; =1+1",
        "\t=1",
        "\r=1",
        " =1+1",
    ],
)
def test_a_formula_after_a_separator_is_prefixed_too(cell: str) -> None:
    [_, [exported]] = _rows(csv_response("x.csv", ("a",), [(cell,)]))
    assert exported == "'" + cell


@pytest.mark.parametrize("cell", ["vllm-0.default", "Qwen/Qwen3-8B", "-3", "1e-5", "a;b", ""])
def test_plain_cells_are_left_as_they_are(cell: str) -> None:
    [_, [exported]] = _rows(csv_response("x.csv", ("a",), [(cell,)]))
    assert exported == cell


def test_every_cell_is_wrapped_in_double_quotes() -> None:
    response = csv_response("x.csv", ("a", "b"), [('say "hi"', 3)])
    assert response.content.decode().splitlines() == ['"a","b"', '"say ""hi""","3"']
