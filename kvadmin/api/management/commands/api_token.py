"""API tokens from scripts: create (printed once), list, change scopes, revoke.

`create` prints the token alone on stdout, so `TOKEN=$(manage.py api_token create ...)`
works; what the token may do goes to stderr.
"""

from argparse import ArgumentParser

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from kvadmin.api.models import ApiToken
from kvadmin.api.scopes import DEFAULT_GRANTS, Scope, parse_grants

SCOPE_HELP = (
    f"a scope to grant, repeatable: {', '.join(Scope)}; events:push is every pod, "
    "events:push=POD,POD only those pods"
)


class Command(BaseCommand):
    help = "Create, list, re-scope or revoke API tokens for machine clients."

    def add_arguments(self, parser: ArgumentParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        create = sub.add_parser("create", help="create a token and print it once")
        create.add_argument("--name", required=True)
        create.add_argument(
            "--scope",
            action="append",
            default=[],
            help=f"{SCOPE_HELP}; without any, the token gets {DEFAULT_GRANTS!r} only",
        )
        scopes = sub.add_parser("scopes", help="replace a token's scopes")
        scopes.add_argument("--name", required=True)
        scopes.add_argument("--scope", action="append", required=True, help=SCOPE_HELP)
        sub.add_parser("revoke", help="revoke a token").add_argument("--name", required=True)
        sub.add_parser("list", help="list tokens and their scopes")

    def handle(self, *args, action: str, **options) -> None:
        getattr(self, f"_{action}")(**options)

    def _create(self, **options) -> None:
        if ApiToken.objects.filter(name=options["name"]).exists():
            raise CommandError(f"--name: a token named {options['name']!r} already exists")
        requested = options["scope"] or [DEFAULT_GRANTS]
        row, token = ApiToken.issue(options["name"], _grants(requested))
        self.stdout.write(token)
        default = "" if options["scope"] else " (the default, least privilege: add --scope)"
        self.stderr.write(f"token {row.name!r} has scopes: {row.scopes}{default}")

    def _scopes(self, **options) -> None:
        row = _named(options["name"])
        row.scopes = _grants(options["scope"])
        row.save(update_fields=["scopes"])
        self.stdout.write(f"token {row.name!r} has scopes: {row.scopes}")

    def _revoke(self, **options) -> None:
        row = _named(options["name"])
        row.revoke()
        self.stdout.write(f"revoked {row.name}")

    def _list(self, **options) -> None:
        for row in ApiToken.objects.all():
            state = "revoked" if row.revoked_at else "active"
            self.stdout.write(f"{row.name:<32} {row.hint}… {state:<8} {row.scopes}")


def _grants(items: list[str]) -> str:
    try:
        return str(parse_grants(items))
    except ValidationError as error:
        raise CommandError(f"--scope: {' '.join(error.messages)}") from None


def _named(name: str) -> ApiToken:
    row = ApiToken.objects.active().filter(name=name).first()
    if row is None:
        raise CommandError(f"--name: no active token named {name!r}")
    return row
