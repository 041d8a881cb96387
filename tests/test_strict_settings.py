"""A typo in the environment is said, not silently read as a default: `DEBUG=ture` stops the
start, a misspelt KVADMIN_ name gets a "did you mean", a knob that is not a number is named."""

import subprocess
import sys

import pytest
from django.core.checks import Error, Warning
from django.core.exceptions import ImproperlyConfigured

from kvadmin.conf import check_knobs, knob, parse_bool
from tests.conftest import ROOT
from tests.waiting import patient


@pytest.mark.parametrize(("text", "value"), [("1", True), (" Yes", True), ("off", False)])
def test_booleans_read_the_usual_words(text: str, value: bool) -> None:
    assert parse_bool("DEBUG", text) is value


def test_a_misspelt_boolean_stops_the_start(subprocess_env) -> None:
    done = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT, env=subprocess_env | {"DEBUG": "ture"}, capture_output=True, text=True,
        timeout=patient(60),
    )  # fmt: skip
    assert done.returncode != 0
    assert "DEBUG='ture': use one of" in done.stderr


def test_an_unknown_knob_gets_a_did_you_mean(settings) -> None:
    settings.KVADMIN = {"LEASE_SECOND": "3"}
    [warning] = check_knobs(None)
    assert isinstance(warning, Warning) and warning.id == "kvadmin.W001"
    assert warning.hint == "Did you mean KVADMIN_LEASE_SECONDS?"


@pytest.mark.parametrize(("name", "text"), [("LEASE_SECONDS", "ten"), ("DEMO", "maybe")])
def test_a_knob_that_does_not_read_as_its_type_is_an_error(settings, name, text) -> None:
    settings.KVADMIN = {name: text}
    [error] = check_knobs(None)
    assert isinstance(error, Error) and f"KVADMIN_{name}={text!r}" in error.msg
    with pytest.raises(ImproperlyConfigured, match=f"KVADMIN_{name}"):
        knob(name)


@pytest.mark.parametrize(
    ("knobs", "found"),
    [
        ({}, []),
        ({"INDEX_VALUE_FORMAT": "legacy", "ROUTER_VERSION": "main"}, []),
        ({"INDEX_VALUE_FORMAT": "Tiered"}, ["kvadmin.E002"]),
        ({"ROUTER_VERSION": "v0.3"}, ["kvadmin.E003"]),
        ({"ROUTER_VERSION": "main"}, ["kvadmin.W002"]),
        ({"INDEX_VALUE_FORMAT": "legacy"}, ["kvadmin.W002"]),
    ],
)
def test_the_value_format_and_router_version_are_checked_together(settings, knobs, found) -> None:
    """compatibility.md 2.7: one of two words each, and a warning while they disagree."""
    settings.KVADMIN = knobs
    assert [message.id for message in check_knobs(None)] == found
