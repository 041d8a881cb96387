"""The first admin's password is kept in var/admin-password, for the user alone, until changed."""

import stat
import subprocess
import sys
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from kvadmin.dashboard.first_admin import password_file, saved_login
from tests.conftest import ROOT
from tests.waiting import patient

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def no_saved_password():
    """Each test starts before any password was made up."""
    password_file().unlink(missing_ok=True)
    yield
    password_file().unlink(missing_ok=True)


def test_the_first_admin_gets_a_password_kept_for_the_user_alone() -> None:
    out = StringIO()
    call_command("ensure_admin", stdout=out)
    username, password = saved_login()
    assert username == "admin"
    assert get_user_model().objects.get(username="admin").check_password(password)
    assert stat.S_IMODE(password_file().stat().st_mode) == 0o600
    assert str(password_file()) in out.getvalue()
    assert password not in out.getvalue(), "the password stays out of the log"


def test_a_second_run_leaves_the_admin_alone() -> None:
    call_command("ensure_admin", stdout=StringIO())
    first = saved_login()
    call_command("ensure_admin", stdout=StringIO())
    assert saved_login() == first


def test_a_password_of_the_users_own_forgets_the_saved_one() -> None:
    call_command("ensure_admin", stdout=StringIO())
    admin = get_user_model().objects.get(username="admin")
    admin.save(update_fields=["last_login"])  # a login saves the user too
    assert saved_login() is not None
    admin.set_password("a-password-of-my-own-7")
    admin.save()
    assert not password_file().exists()


@pytest.mark.django_db(transaction=True)
def test_admin_password_resets_it_without_a_terminal(subprocess_env) -> None:
    call_command("ensure_admin", stdout=StringIO())
    old = saved_login()[1]
    done = subprocess.run(
        [sys.executable, "manage.py", "admin_password"],
        cwd=ROOT, env=subprocess_env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
        timeout=patient(60),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    username, new = saved_login()
    assert new != old and f"password: {new}" in done.stdout
    assert get_user_model().objects.get(username=username).check_password(new)
