"""Tier weights and TTFT parameters from scripts: show, set, restore, history, fit; the page's
rules and versions (a version holds both, kvadmin.weights.parameters)."""

import dataclasses
import getpass
import json
from argparse import ArgumentParser

import redis
from django.core.management.base import BaseCommand, CommandError

from kvadmin.engines.models import Engine
from kvadmin.index.serving import index_serving
from kvadmin.redis_clients import index_client
from kvadmin.weights import export, parameters
from kvadmin.weights.active import active_weights, publish
from kvadmin.weights.config import weight_text
from kvadmin.weights.draft import Draft, DraftRow, SpeedRow, new_row_key, validate
from kvadmin.weights.fit import fit_from_engines
from kvadmin.weights.models import TierWeightsVersion
from kvadmin.weights.parameters import SCALARS, number_text
from kvadmin.weights.versions import (
    NothingChanged,
    ReasonRequired,
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
        change.add_argument(
            "--param",
            action="append",
            default=[],
            metavar="NAME=VALUE",
            help="a TTFT parameter: " + ", ".join(name for name, _ in SCALARS),
        )
        change.add_argument(
            "--speed",
            action="append",
            default=[],
            metavar="MODEL=TOKENS_PER_S",
            help="a model's prefill speed (an empty value removes it)",
        )
        change.add_argument("--reason", required=True, help="why (shown in the history)")
        change.add_argument("--author", default=f"{getpass.getuser()} (cli)")
        restore = sub.add_parser("restore", help="save a copy of an earlier version")
        restore.add_argument("version", type=int)
        restore.add_argument(
            "--base-version",
            type=int,
            required=True,
            metavar="N",
            help="the current version as you saw it: when another was saved since, nothing "
            "is restored (exit 1)",
        )
        restore.add_argument("--reason", required=True, help="why (shown in the history)")
        restore.add_argument("--author", default=f"{getpass.getuser()} (cli)")
        fitting = sub.add_parser(
            "fit", help="the TTFT parameters the engines' prefill counters fit (saves nothing)"
        )
        fitting.add_argument("--json", action="store_true", help="JSON, for scripts")
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
            serving = index_serving()
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
        self.stdout.write("TTFT parameters (kvadmin's own; not in the kthena export):")
        ttft = version.weight_config.ttft
        for name, label in SCALARS:
            self.stdout.write(f"  {name:<30} {number_text(getattr(ttft, name)):<10} {label}")
        for model, speed in ttft.prefill_tokens_per_s:
            self.stdout.write(f"  {'prefill_tokens_per_s':<30} {number_text(speed):<10} {model}")
        self.stdout.write(f"scoring in this process uses version {active_weights().version}")

    def _set(self, **options) -> None:
        current = current_version()
        draft = Draft.from_config(current.weight_config, current.version)
        draft.reason = options["reason"]
        if options["fallback"] is not None:
            draft.fallback = options["fallback"]
        problems = _apply_arguments(draft, options["weights"], options["remove"])
        problems += _apply_parameters(draft, options["param"], options["speed"])
        validate(draft)
        problems += [f"{row.name!r}: {'; '.join(row.errors)}" for row in draft.rows if row.errors]
        problems += [f"fallback: {error}" for error in draft.fallback_errors]
        problems += [
            f"{name}: {'; '.join(errors)}" for name, errors in draft.ttft_errors.items() if errors
        ]
        problems += [
            f"speed of {r.model!r}: {'; '.join(r.errors)}" for r in draft.speeds if r.errors
        ]
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
        except (NothingChanged, ReasonRequired) as refused:
            raise CommandError(f"nothing saved: {refused}") from None
        except StaleDraft as stale:
            raise _stale(stale) from None
        self.stdout.write(f"saved version {saved.version}")

    def _restore(self, **options) -> None:
        try:
            saved = restore_version(
                options["version"],
                author=options["author"],
                base_version=options["base_version"],
                reason=options["reason"],
            )
        except TierWeightsVersion.DoesNotExist:
            raise CommandError(f"there is no version {options['version']}") from None
        except (NothingChanged, ReasonRequired, ValueError) as refused:
            raise CommandError(f"nothing saved: {refused}") from None
        except StaleDraft as stale:
            raise _stale(stale) from None
        self.stdout.write(f"restored version {options['version']} as version {saved.version}")

    def _fit(self, **options) -> None:
        base = current_version().weight_config.ttft
        engines = Engine.objects.values_list("pod", "model", "kind")
        fitted = fit_from_engines(index_client(), engines, base)
        if options["json"]:
            data = {
                "fitted": fitted.fitted,
                "ttft": parameters.to_json(fitted.parameters),
                "first_token_s": fitted.first_token_s,
                "models": [dataclasses.asdict(model) for model in fitted.models],
                "skipped": fitted.skipped,
                "refused_windows": fitted.refused,
            }
            self.stdout.write(json.dumps(data, indent=2))
            return
        t0 = fitted.first_token_s
        self.stdout.write(f"T0 {number_text(t0) + ' s' if t0 is not None else 'not fitted'}")
        for model in fitted.models:
            speed = model.tokens_per_s
            text = f"{number_text(speed)} tokens/s" if speed is not None else "not fitted"
            note = f"  ({model.note})" if model.note else ""
            self.stdout.write(
                f"  {model.model}: {text} from {model.windows} windows, "
                f"{model.requests} requests, {model.pods} pods{note}"
            )
        for why in fitted.skipped:
            self.stdout.write(f"  skipped {why}")
        if fitted.fitted:
            args = [f"--param first_token_s={number_text(fitted.parameters.first_token_s)}"]
            args += [
                f"--speed {model.model}={number_text(model.tokens_per_s)}"
                for model in fitted.models
                if model.tokens_per_s is not None
            ]
            self.stdout.write("save them with: tier_weights set " + " ".join(args))

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


def _stale(stale: StaleDraft) -> CommandError:
    since = "".join(f"\n  {line}" for line in stale.details)
    return CommandError(f"nothing saved: {stale}{since}")


def _apply_parameters(draft: Draft, params: list[str], speeds: list[str]) -> list[str]:
    """Change the draft's TTFT fields as `--param` and `--speed` say; returns the arguments
    it cannot read."""
    problems = []
    for assignment in params:
        name, equals, value = assignment.partition("=")
        if not equals or name.strip() not in draft.ttft:
            known = ", ".join(name for name, _ in SCALARS)
            problems.append(f"--param {assignment!r}: expected NAME=VALUE, NAME one of {known}")
            continue
        draft.ttft[name.strip()] = value
    rows = {row.model: row for row in draft.speeds}
    for assignment in speeds:
        model, equals, value = assignment.rpartition("=")
        if not equals or not model:
            problems.append(f"--speed {assignment!r}: expected MODEL=TOKENS_PER_S")
            continue
        row = rows.get(model)
        if row is None:
            row = rows[model] = SpeedRow(new_row_key(), model)
            draft.speeds.append(row)
        row.speed, row.removed = value, not value.strip()
    return problems


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
