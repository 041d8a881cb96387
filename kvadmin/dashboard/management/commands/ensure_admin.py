"""Create the first admin user when there is none, and print its password once."""

import secrets

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Create an 'admin' superuser with a random password if no superuser exists yet."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--username", default="admin")

    def handle(self, *args, username: str, **options) -> None:
        users = get_user_model()
        if users.objects.filter(is_superuser=True).exists():
            return
        password = secrets.token_urlsafe(12)
        users.objects.create_superuser(username=username, email="", password=password)
        self.stdout.write(
            self.style.SUCCESS(
                f"\n  Created the first admin user.\n"
                f"  username: {username}\n  password: {password}\n"
                f"  (shown once; change it under /admin/ or with `manage.py changepassword`)\n"
            )
        )
