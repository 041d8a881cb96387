"""`manage.py score`: score one request as POST /api/v1/score does, and explain the result."""

import json
from typing import Any

import msgspec
from django.core.management.base import BaseCommand, CommandError, CommandParser

from kvadmin.redis_clients import REDIS_OUTAGES
from kvadmin.routing import outcomes, service
from kvadmin.routing.decisions import Decision
from kvadmin.routing.presenters import DecisionRow
from scoring.policy import POLICIES


def _token_ids(text: str) -> list[int]:
    try:
        return [int(part) for part in text.replace(" ", "").split(",") if part]
    except ValueError:
        raise CommandError("--token-ids must be comma-separated integers, e.g. 1,2,3") from None


class Command(BaseCommand):
    help = "Score the candidate pods for one request and explain the choice (recorded too)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--model", required=True, help="The served model name.")
        source = parser.add_mutually_exclusive_group(required=True)
        source.add_argument("--token-ids", help="Comma-separated token ids.")
        source.add_argument("--prompt", help="Text, tokenized by a candidate engine.")
        source.add_argument("--messages", help='Chat messages as JSON: [{"role", "content"}].')
        parser.add_argument("--pods", help="Comma-separated candidate pods (default: all).")
        parser.add_argument("--request-id")
        parser.add_argument(
            "--policy",
            choices=POLICIES,
            help="How the pod is chosen (default: the KVADMIN_ROUTING_POLICY knob).",
        )
        parser.add_argument("--json", action="store_true", help="Print the API's JSON answer.")
        parser.add_argument(
            "--no-record", action="store_true", help="Leave the decision out of the log."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        messages = None
        if options["messages"] is not None:
            try:
                messages = json.loads(options["messages"])
            except ValueError as error:
                raise CommandError(f"--messages is not JSON: {error}") from None
        pods = options["pods"]
        try:
            decision = service.score(
                options["model"],
                token_ids=_token_ids(options["token_ids"]) if options["token_ids"] else None,
                prompt=options["prompt"],
                messages=messages,
                pods=[pod.strip() for pod in pods.split(",") if pod.strip()] if pods else None,
                request_id=options["request_id"],
                policy=options["policy"],
                record=not options["no_record"],
            )
        except service.ScoreError as error:
            field = f" ({error.field})" if error.field else ""
            raise CommandError(f"{error.message}{field}") from None
        except REDIS_OUTAGES as error:
            raise CommandError(f"Redis is unavailable: {error}") from None
        if options["json"]:
            answer = msgspec.json.encode(outcomes.decision_answer(decision))
            self.stdout.write(msgspec.json.format(answer).decode())
        else:
            self.stdout.write(explain(decision))


def explain(decision: Decision) -> str:
    """The decision as plain text: the same explanation as the feed's expanded row."""
    row = DecisionRow(decision)
    lines = [
        f"decision {decision.decision_id}  model {decision.model}  weights version "
        f"{decision.weights_version}",
        f"{decision.tokens} tokens ({decision.input}) -> {decision.blocks} blocks, "
        f"longest match {decision.longest_match}, {len(decision.candidates)} candidates",
        f"chosen: {decision.chosen or 'none'}"
        + (" (tie-break: rendezvous hashing)" if decision.tie_break else ""),
        "",
    ]
    width = max((len(pod) for pod in decision.candidates), default=3)
    lines.append(f"{'pod':<{width}}  score  matched  media / arithmetic")
    for line in row.pods:
        media = " ".join(f"{badge.label}:{badge.count}" for badge in line.media)
        terms = " + ".join(f"{badge.count}x{badge.label}@{weight}" for badge, weight in line.terms)
        mark = " *" if line.chosen else ""
        lines.append(
            f"{line.scored.pod:<{width}}  {line.scored.score:>5}  {line.scored.matched_blocks:>7}"
            f"  {media}{mark}"
        )
        lines.append(
            f"{'':<{width}}                  {terms} = {line.scored.weighted_sum}; "
            f"/ {decision.blocks} x 100 = {line.ratio} -> {line.scored.score}"
        )
    for pod in row.unscored:
        lines.append(f"{pod:<{width}}      -        0  (does not hold the first block)")
    lines.append("")
    lines.append(f"policy {decision.policy}: {decision.reason}")
    if row.estimates:
        lines.append(
            f"{'pod':<{width}}  {'wait':>8} {'prefill':>8} {'reload':>8} {'penalty':>8} "
            f"{'cost':>8}  (ms)  load"
        )
    for est in row.estimates:
        mark = " *" if est.chosen else ""
        lines.append(
            f"{est.pod:<{width}}  {est.wait:>8} {est.prefill:>8} {est.reload:>8} "
            f"{est.penalty:>8} {est.cost:>8}        {est.load}{mark}"
        )
    if decision.dropped.non_candidates:
        lines.append(f"not candidates: {', '.join(decision.dropped.non_candidates)}")
    if decision.dropped.stale:
        lines.append(f"stale (before their last restart): {', '.join(decision.dropped.stale)}")
    timings = ", ".join(f"{name} {ms:.3f}" for name, ms in decision.timings_ms.items())
    lines.append(f"timings ms: {timings}")
    return "\n".join(lines)
