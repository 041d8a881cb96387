"""The first admin user's password: made up once, kept in var/admin-password (readable by the
user alone) until someone changes it, and shown by `make run` once the stack is up.

A log scrolls by at hundreds of lines a minute; a password printed into it once is lost.
"""

import os
import secrets
from pathlib import Path
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db.models.signals import pre_save
from django.dispatch import receiver

if TYPE_CHECKING:
    from django.contrib.auth.base_user import AbstractBaseUser

USERNAME = "admin"


def password_file() -> Path:
    return settings.VAR_DIR / "admin-password"


def saved_login() -> tuple[str, str] | None:
    """(username, password) while the made-up password is still the user's."""
    try:
        lines = dict(
            line.split(": ", 1) for line in password_file().read_text().splitlines() if ": " in line
        )
    except FileNotFoundError:
        return None
    if "username" not in lines or "password" not in lines:
        return None
    return lines["username"], lines["password"]


def make_up_password(username: str = USERNAME) -> str:
    """Give `username` (a superuser, created if missing) a new random password and save it."""
    users = get_user_model()
    user = users.objects.filter(username=username).first()
    if user is None:
        user = users(username=username, email="", is_staff=True, is_superuser=True)
    password = secrets.token_urlsafe(12)
    user.set_password(password)
    user.save()
    descriptor = os.open(password_file(), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(descriptor, 0o600)  # the mode of open() applies to a new file only
    with os.fdopen(descriptor, "w") as file:
        file.write(f"username: {username}\npassword: {password}\n")
    return password


@receiver(pre_save, sender=settings.AUTH_USER_MODEL)
def _forget_a_changed_password(sender: type, instance: "AbstractBaseUser", **kwargs: Any) -> None:
    """Once the user picks a password of their own, the saved one is only a stale secret."""
    saved = saved_login()
    if saved is None or instance.pk is None or saved[0] != instance.get_username():
        return
    stored = sender.objects.filter(pk=instance.pk).values_list("password", flat=True).first()
    if stored != instance.password:
        password_file().unlink(missing_ok=True)
