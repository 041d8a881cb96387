from argparse import ArgumentParser

from django.core.management.base import BaseCommand, CommandError

from kvadmin.api.models import ApiToken


class Command(BaseCommand):
    help = "Create or revoke API tokens for machine clients."

    def add_arguments(self, parser: ArgumentParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        sub.add_parser("create", help="create a token and print it once").add_argument(
            "--name", required=True
        )
        sub.add_parser("revoke", help="revoke a token").add_argument("--name", required=True)
        sub.add_parser("list", help="list tokens")

    def handle(self, *args, action: str, **options) -> None:
        if action == "create":
            if ApiToken.objects.filter(name=options["name"]).exists():
                raise CommandError(f"--name: a token named {options['name']!r} already exists")
            _, token = ApiToken.issue(options["name"])
            self.stdout.write(token)
        elif action == "revoke":
            row = ApiToken.objects.active().filter(name=options["name"]).first()
            if row is None:
                raise CommandError(f"--name: no active token named {options['name']!r}")
            row.revoke()
            self.stdout.write(f"revoked {row.name}")
        else:
            for row in ApiToken.objects.all():
                state = "revoked" if row.revoked_at else "active"
                self.stdout.write(f"{row.name:<32} {row.hint}… {state}")
