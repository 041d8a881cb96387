"""Manage the engine registry from scripts: add, list, remove."""

import json
from argparse import ArgumentParser

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from kvadmin.engines.models import Engine
from kvadmin.engines.removal import remove_engine

_OPTIONS = {"serve_address": "serve", "__all__": "serve"}
"""The option of a field whose name is not the option's (the one table constraint is the
serving address's)."""


def _validation_message(error: ValidationError) -> str:
    return "; ".join(
        f"--{_OPTIONS.get(field, field.replace('_', '-'))}: {' '.join(messages)}"
        for field, messages in error.message_dict.items()
    )


class Command(BaseCommand):
    help = "Add, list or remove the inference engines kvadmin consumes KV events from."

    def add_arguments(self, parser: ArgumentParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        add = sub.add_parser("add", help="register an engine")
        add.add_argument("--pod", required=True, help="{pod_name}.{namespace}")
        add.add_argument("--model", required=True, help="served model name")
        add.add_argument("--kind", required=True, choices=Engine.Kind.values)
        add.add_argument("--events", required=True, help="ZMQ PUB endpoint, e.g. tcp://h:5557")
        add.add_argument("--replay", default="", help="ZMQ ROUTER replay endpoint")
        add.add_argument("--topic", default="")
        add.add_argument("--dp-size", type=int, default=1)
        add.add_argument("--block-size", type=int, default=16)
        add.add_argument("--http", default="", help="HTTP base URL serving /tokenize")
        add.add_argument(
            "--serve",
            default="",
            help="ip:port a gateway sends the engine's inference traffic to",
        )
        add.add_argument(
            "--tokenizer",
            default="",
            help="the model's tokenizer.json (or its directory): tokenize locally",
        )
        add.add_argument("--disabled", action="store_true")
        listing = sub.add_parser("list", help="list engines")
        listing.add_argument("--json", action="store_true")
        remove = sub.add_parser("remove", help="remove an engine and purge its index entries")
        remove.add_argument("--pod", required=True)

    def handle(self, *args, action: str, **options) -> None:
        getattr(self, f"_{action}")(**options)

    def _add(self, **options) -> None:
        engine = Engine(
            pod=options["pod"],
            model=options["model"],
            kind=options["kind"],
            events_endpoint=options["events"],
            replay_endpoint=options["replay"],
            topic=options["topic"],
            dp_size=options["dp_size"],
            block_size=options["block_size"],
            http_base_url=options["http"],
            serve_address=options["serve"],
            tokenizer=options["tokenizer"],
            enabled=not options["disabled"],
        )
        try:
            engine.full_clean()
        except ValidationError as error:
            raise CommandError(_validation_message(error)) from None
        with transaction.atomic():
            engine.save()
        self.stdout.write(f"added {engine.pod} ({engine.kind}, {engine.model})")

    def _list(self, **options) -> None:
        engines = [engine.as_dict() for engine in Engine.objects.all()]
        if options["json"]:
            self.stdout.write(json.dumps(engines, indent=2))
            return
        for engine in engines:
            state = "enabled" if engine["enabled"] else "disabled"
            self.stdout.write(
                f"{engine['pod']:<32} {engine['kind']:<7} {engine['model']:<32} "
                f"{engine['events_endpoint']} dp={engine['dp_size']} {state}"
            )

    def _remove(self, **options) -> None:
        try:
            purged = remove_engine(options["pod"])
        except Engine.DoesNotExist:
            raise CommandError(f"--pod: no engine {options['pod']!r} is registered") from None
        self.stdout.write(f"removed {options['pod']}; purged {purged} index entries")
