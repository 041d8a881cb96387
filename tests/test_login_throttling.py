"""Repeated failed logins of one username from one address are locked out (django-axes) with
a page that says why and for how long; others are not; an administrator can unlock."""

import os
import subprocess
import sys
from datetime import timedelta

import pytest
from axes.models import AccessAttempt
from django.core.management import call_command
from django.test import Client, override_settings
from django.utils import timezone

from tests.conftest import ROOT
from tests.waiting import patient

pytestmark = pytest.mark.django_db
LOGIN = "/accounts/login/"
PASSWORD = "pw-bob-12345"


@pytest.fixture
def bob(django_user_model):
    """Bob has an account (password PASSWORD) for the logins to fail and succeed against."""
    return django_user_model.objects.create_user("bob", password=PASSWORD)


def _log_in(password: str, address: str = "10.1.2.3", username: str = "bob"):
    return Client(REMOTE_ADDR=address).post(LOGIN, {"username": username, "password": password})


def _fail(times: int, limit: int = 5, **who: str) -> None:
    """`times` wrong passwords: the form again below the limit, the lockout page from it on."""
    for attempt in range(1, times + 1):
        response = _log_in("wrong", **who)
        assert response.status_code == (429 if attempt >= limit else 200), attempt


def test_the_fifth_failure_locks_the_pair_out_even_for_the_right_password(bob) -> None:
    _fail(4)
    assert _log_in(PASSWORD).status_code == 302, "below the limit the right password works"
    _fail(5)

    locked = _log_in(PASSWORD)

    assert locked.status_code == 429
    html = locked.content.decode()
    assert "Too many failed logins" in html and "<strong>bob</strong>" in html
    assert "failed 5 times" in html and "Try again 15 minutes after your last" in html
    assert "axes_reset_username bob" in html
    assert 'aria-label="Main"' not in html and "<header" in html, "the site's own page"


def test_other_addresses_and_other_users_are_not_locked_out(bob, django_user_model) -> None:
    django_user_model.objects.create_user("alice", password="pw-alice-123")
    _fail(5)

    assert _log_in(PASSWORD, address="10.9.9.9").status_code == 302
    assert _log_in("pw-alice-123", username="alice").status_code == 302


def test_the_lockout_ends_after_the_cooloff(bob) -> None:
    _fail(5)
    AccessAttempt.objects.update(attempt_time=timezone.now() - timedelta(minutes=16))

    assert _log_in(PASSWORD).status_code == 302


def test_axes_reset_unlocks(bob) -> None:
    _fail(5)
    call_command("axes_reset_username", "bob")

    assert _log_in(PASSWORD).status_code == 302


@override_settings(AXES_FAILURE_LIMIT=2)
def test_the_limit_is_a_setting(bob) -> None:
    _fail(2, limit=2)
    assert _log_in(PASSWORD).status_code == 429


def test_the_limit_and_cooloff_come_from_the_environment() -> None:
    env = os.environ | {"KVADMIN_LOGIN_FAILURE_LIMIT": "3", "KVADMIN_LOGIN_COOLOFF_MINUTES": "2"}
    code = "from django.conf import settings as s; print(s.AXES_FAILURE_LIMIT, s.AXES_COOLOFF_TIME)"
    result = subprocess.run(
        [sys.executable, "-c", f"import django; django.setup(); {code}"],
        cwd=ROOT,
        env=env | {"DJANGO_SETTINGS_MODULE": "kvadmin.settings"},
        capture_output=True,
        text=True,
        timeout=patient(60),
        check=True,
    )
    assert result.stdout.split() == ["3", "0:02:00"]
