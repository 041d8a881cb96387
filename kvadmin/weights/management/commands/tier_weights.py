"""Tier weights from scripts: show, set, restore, history; the page's rules and versions."""

import getpass
import json
from argparse import ArgumentParser

import redis
from django.core.management.base import BaseCommand, CommandError

from kvadmin.index.serving import index_serving
from kvadmin.redis_clients import index_client
from kvadmin.weights import export
from kvadmin.weights.active import active_weights, publish
from kvadmin.weights.config import weight_text
from kvadmin.weights.draft import Draft, DraftRow, new_row_key, validate
from kvadmin.weights.models import TierWeightsVersion
from kvadmin.weights.versions import (
    NothingChanged,
    StaleDraft,
    current_version,
    history,
    restore_version,
    save_version,
)
from scoring.weights import normalize_name


class Command(BaseCommand):
    help = "Show or change the tier weights scoring uses (each change is a new version)."

    def add_arguments(self, parser: ArgumentParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        show = sub.add_parser("show", help="the current version")
        formats = show.add_mutually_exclusive_group()
        formats.add_argument("--json", action="store_true", help="JSON, for scripts")
        formats.add_argument("--yaml", action="store_true", help="the kthena ConfigMap fragment")
        change = sub.add_parser("set", help="save a new version: set MEDIUM=WEIGHT ...")
        change.add_argument("weights", nargs="*", metavar="MEDIUM=WEIGHT")
        change.add_argument("--fallback", help="weight of unknown and missing media")
        change.add_argument("--remove", action="append", default=[], metavar="MEDIUM")
        change.add_argument(
            "--base-version",
            type=int,
            required=True,
            metavar="N",
            help="the version this change is made from (`show` names it); when another was "
            "saved since, nothing is saved and the command tells what changed (exit 1)",
        )
        change.add_argument("--reason", default="")
        change.add_argument("--author", default=f"{getpass.getuser()} (cli)")
        restore = sub.add_parser("restore", help="save a copy of an earlier version")
        restore.add_argument("version", type=int)
        restore.add_argument("--author", default=f"{getpass.getuser()} (cli)")
        listing = sub.add_parser("history", help="the latest versions and what they changed")
        listing.add_argument("--limit", type=int, default=20)
        announce = sub.add_parser(
            "publish", help="announce the current version to every process again"
        )
        announce.add_argument(
            "--force", action="store_true", help="even when Redis names a newer one"
        )

    def handle(self, *args, action: str, **options) -> None:
        getattr(self, f"_{action}")(**options)

    def _show(self, **options) -> None:
        version = current_version()
        try:
            serving = index_serving(index_client())
        except redis.RedisError:
            serving = None  # the export says the index did not answer
        if options["yaml"]:
            self.stdout.write(export.kthena_yaml(version, serving), ending="")
            return
        data = export.weights_json(version, serving)
        if options["json"]:
            self.stdout.write(json.dumps(data, indent=2))
            return
        self.stdout.write(f"version {version.version} by {version.author}: {version.reason}")
        for name, weight in data["tierWeights"].items():
            origin = "configured" if name in data["configured"] else "kthena default"
            note = data["notes"].get(name, "")
            line = f"  {name:<16} {weight_text(weight):<6} {origin}"
            self.stdout.write(f"{line}  {note}" if note else line)
        fallback = weight_text(data["fallback"])
        self.stdout.write(f"  {'(fallback)':<16} {fallback:<6} every other medium")
        self.stdout.write(f"scoring in this process uses version {active_weights().version}")

    def _set(self, **options) -> None:
        current = current_version()
        draft = Draft.from_config(current.weight_config, current.version)
        draft.reason = options["reason"]
        if options["fallback"] is not None:
            draft.fallback = options["fallback"]
        problems = _apply_arguments(draft, options["weights"], options["remove"])
        validate(draft)
        problems += [f"{row.name!r}: {'; '.join(row.errors)}" for row in draft.rows if row.errors]
        problems += [f"fallback: {error}" for error in draft.fallback_errors]
        problems += draft.form_errors
        if problems or draft.config is None:
            raise CommandError("nothing saved: " + " | ".join(problems))
        try:
            saved = save_version(
                draft.config,
                author=options["author"],
                reason=draft.reason,
                base_version=options["base_version"],
            )
        except NothingChanged as refused:
            raise CommandError(f"nothing saved: {refused}") from None
        except StaleDraft as stale:
            since = "".join(f"\n  {line}" for line in stale.details)
            raise CommandError(f"nothing saved: {stale}{since}") from None
        self.stdout.write(f"saved version {saved.version}")

    def _restore(self, **options) -> None:
        try:
            saved = restore_version(options["version"], author=options["author"])
        except TierWeightsVersion.DoesNotExist:
            raise CommandError(f"there is no version {options['version']}") from None
        except NothingChanged as refused:
            raise CommandError(f"nothing saved: {refused}") from None
        self.stdout.write(f"restored version {options['version']} as version {saved.version}")

    def _history(self, **options) -> None:
        for entry in history(options["limit"]):
            version = entry.version
            self.stdout.write(
                f"version {version.version}  {version.created_at:%Y-%m-%d %H:%M:%S}  "
                f"{version.author}  {version.reason}"
            )
            for change in entry.changes:
                self.stdout.write(f"    {change}")

    def _publish(self, **options) -> None:
        version = current_version()
        if publish(version.version, version.weight_config, force=options["force"]):
            self.stdout.write(f"published version {version.version}")
        else:
            self.stdout.write(f"Redis already names version {version.version} or a newer one")


def _apply_arguments(draft: Draft, assignments: list[str], removals: list[str]) -> list[str]:
    """Change the draft's rows as the arguments say; returns the arguments it cannot read."""
    problems = []
    saved_rows = {normalize_name(row.name): row for row in draft.rows}
    for assignment in assignments:
        name, equals, weight = assignment.partition("=")
        if not equals:
            problems.append(f"{assignment!r}: expected MEDIUM=WEIGHT")
            continue
        row = saved_rows.pop(normalize_name(name), None)
        if row is None:  # a new medium, or the same one named twice on the command line
            row = DraftRow(new_row_key(), name)
            draft.rows.append(row)
        row.weight = weight
    for name in removals:
        rows = [row for row in draft.rows if normalize_name(row.name) == normalize_name(name)]
        if not rows:
            problems.append(f"{name!r}: not configured, nothing to remove")
        for row in rows:
            row.removed = True
    return problems
