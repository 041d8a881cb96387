"""Move a model's index to another index group (README, "Index groups"):

1. set KVADMIN_INDEX_GROUPS so that the model matches the new group, and restart the workers,
   the web servers and the endpoint picker with it (point kthena's routers for the model at the
   new group's primary too). From then on the model's streams are read into the new group,
   which rebuilds its index from the engines' replay (a stream new to a group replays from
   seq 0) and their new events; decisions read it there;
2. `manage.py index_move_model MODEL --to PATTERN`: drains the old group: every entry and
   stream status of the model's pods goes from every group but the new one. It refuses while
   a worker with the old setting still reads them there.
"""

from argparse import ArgumentParser

from django.core.management.base import BaseCommand, CommandError

from kvadmin.engines.models import Engine
from kvadmin.index.groups import InvalidIndexGroups, group_named, group_of
from kvadmin.index.purge import StillRead, drain_elsewhere


class Command(BaseCommand):
    help = "Drain a model's index from the groups it left, once KVADMIN_INDEX_GROUPS moved it."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("model", help="the served model name")
        parser.add_argument(
            "--to", required=True, dest="pattern", help="the pattern of the group it moves to"
        )

    def handle(self, *args, model: str, pattern: str, **options) -> None:
        try:
            target = group_named(pattern)
        except InvalidIndexGroups as error:
            raise CommandError(str(error)) from None
        home = group_of(model)
        if home != target:
            raise CommandError(
                f"KVADMIN_INDEX_GROUPS puts {model!r} in group {home.shown}, not {pattern!r}: "
                f"first make {model!r} match {pattern!r} there (and restart the workers, web "
                "servers and picker with it), then run this again"
            )
        pods = dict(Engine.objects.filter(model=model).values_list("pod", "dp_size"))
        try:
            removed = drain_elsewhere(model, pods)
        except StillRead as error:
            raise CommandError(str(error)) from None
        for group, count in removed.items():
            self.stdout.write(f"{group.shown}: {count} block ownerships of {model} removed")
        self.stdout.write(
            f"{model} is indexed in {target.shown}, rebuilt there from the engines' replay "
            "and their new events (/pods/ shows its streams)"
        )
