"""Give the admin user a new random password (`make admin-password`), with no prompt."""

from django.core.management.base import BaseCommand

from kvadmin.dashboard.first_admin import USERNAME, make_up_password, password_file


class Command(BaseCommand):
    help = "Set a new random password for a superuser (created if missing) and print it."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--username", default=USERNAME)

    def handle(self, *args, username: str, **options) -> None:
        password = make_up_password(username)
        self.stdout.write(
            f"username: {username}\npassword: {password}\n"
            f"(kept in {password_file()} until you change it)"
        )
