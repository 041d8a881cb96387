"""Create the first admin user when there is no superuser yet; its password goes to a file."""

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from kvadmin.dashboard.first_admin import USERNAME, make_up_password, password_file


class Command(BaseCommand):
    help = (
        f"Create the superuser {USERNAME!r} with a random password, kept in var/admin-password "
        "until it is changed, if no superuser exists yet."
    )

    def handle(self, *args, **options) -> None:
        if get_user_model().objects.filter(is_superuser=True).exists():
            return
        make_up_password()
        self.stdout.write(
            f"Created the admin user {USERNAME!r}; its password is in {password_file()}"
        )
