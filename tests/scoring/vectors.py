"""The kthena conformance vectors (docs/compatibility.md section 2), as test parameters."""

import json
from typing import Any

import pytest

from tests.conftest import CONFORMANCE

KTHENA: dict[str, Any] = json.loads(CONFORMANCE.read_text())


def named(cases: list[dict[str, Any]]) -> list[Any]:
    """Table cases as pytest params with their "name" as the id."""
    return [pytest.param(case, id=case["name"]) for case in cases]
