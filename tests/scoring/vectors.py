"""The kthena conformance vectors (SPEC 2), loaded from the shared folder, never copied here."""

import json
from typing import Any

import pytest

from tests.conftest import SHARED

KTHENA: dict[str, Any] = json.loads((SHARED / "conformance" / "kthena.json").read_text())


def named(cases: list[dict[str, Any]]) -> list[Any]:
    """Table cases as pytest params with their "name" as the id."""
    return [pytest.param(case, id=case["name"]) for case in cases]
