"""Block values are read as kthena reads them (compatibility.md 2.2, 2.4 step 1)."""

from typing import Any

import pytest

from scoring.values import BlockValue, is_stale, parse_seconds, parse_value
from tests.scoring.vectors import KTHENA


@pytest.mark.parametrize("vector", KTHENA["value_parsing"])
def test_it_parses_legacy_and_medium_values(vector: dict[str, Any]) -> None:
    value = parse_value(vector["value"])
    assert value.timestamp == vector["timestamp"]
    assert (value.medium or "") == vector["medium"]


def test_it_reports_no_medium_as_none() -> None:
    assert parse_value("1703123456").medium is None
    assert parse_value("1703123456|").medium is None


def test_it_keeps_the_engines_spelling_of_the_medium() -> None:
    assert parse_value("5| Cpu_Pinned ") == BlockValue("5", " Cpu_Pinned ", 5)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("1703123456", 1703123456),
        ("+5", 5),
        ("-5", -5),
        ("007", 7),
        ("9223372036854775807", 2**63 - 1),
        ("-9223372036854775808", -(2**63)),
    ],
)
def test_it_reads_timestamps_as_go_parseint_does(text: str, seconds: int) -> None:
    assert parse_seconds(text) == seconds


@pytest.mark.parametrize(
    "text",
    ["", "+", "not-a-number", " 5", "5 ", "5_0", "1e3", "5.0", "0x10", "٣", "9223372036854775808"],
)
def test_it_leaves_timestamps_go_cannot_parse_unparsed(text: str) -> None:
    assert parse_seconds(text) is None


def test_a_pod_without_a_known_start_is_never_stale() -> None:
    assert not is_stale(parse_value("1"), None)
