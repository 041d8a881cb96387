"""How a decision reads on the feed: rows, media badges and the weighted arithmetic.

Rendering lives in templates/routing/feed.html; this module turns a Decision into the few
values the templates cannot compute (the chosen pod's line, badge classes, the sum written
out in block order).
"""

from dataclasses import dataclass
from datetime import UTC, datetime

from django.template.loader import render_to_string
from django.utils.safestring import SafeString

from kvadmin.conf import knob
from kvadmin.figures import figure, truncated
from kvadmin.media import medium_class, medium_label
from kvadmin.routing.decisions import CandidateEstimate, Decision, PodExplanation
from kvadmin.routing.outcomes import Outcome, Predicted, predicted


@dataclass(frozen=True, slots=True)
class Badge:
    label: str
    css: str
    count: int


def badge(medium: str | None, count: int) -> Badge:
    """A medium as a badge: its name, and its colour class (kvadmin.css)."""
    return Badge(medium_label(medium), medium_class(medium), count)


@dataclass(frozen=True, slots=True)
class PodLine:
    """One scored pod with its arithmetic: runs in block order, each `count × weight`."""

    scored: PodExplanation
    chosen: bool
    media: list[Badge]
    terms: list[tuple[Badge, str]]
    """Each run's badge and weight (as written)."""
    ratio: str
    """weighted sum / blocks × 100, cut to two decimals (the score is its integer part)."""

    @property
    def weighted_sum(self) -> str:
        return figure(self.scored.weighted_sum)

    @classmethod
    def of(cls, decision: Decision, scored: PodExplanation) -> "PodLine":
        return cls(
            scored=scored,
            chosen=scored.pod == decision.chosen,
            media=[badge(medium or None, count) for medium, count in scored.media.items()],
            terms=[
                (badge(medium, count), figure(decision.weights.get(medium or "", 1.0)))
                for medium, count in scored.runs
            ],
            ratio=truncated(
                scored.weighted_sum / decision.blocks * 100 if decision.blocks else 0.0
            ),
        )


def ms(seconds: float) -> str:
    """Seconds as the feed shows an estimate: milliseconds, one decimal."""
    return f"{seconds * 1000:.1f}"


@dataclass(frozen=True, slots=True)
class EstimateLine:
    """One candidate's TTFT estimate as the feed and the CLI show it (milliseconds): cost =
    wait + prefill (its tier reload included) + work penalty."""

    estimate: CandidateEstimate
    chosen: bool

    @property
    def pod(self) -> str:
        return self.estimate.pod

    @property
    def wait(self) -> str:
        return ms(self.estimate.wait_s)

    @property
    def prefill(self) -> str:
        return ms(self.estimate.prefill_s)

    @property
    def reload(self) -> str:
        return ms(self.estimate.reload_s)

    @property
    def penalty(self) -> str:
        return ms(self.estimate.work_penalty_s)

    @property
    def cost(self) -> str:
        return ms(self.estimate.cost_s)

    @property
    def load(self) -> str:
        """Where the wait came from."""
        if self.estimate.load_stale:
            return "stale: virtual queue only"
        return f"engine: {self.estimate.engine_waiting} waiting"


@dataclass(frozen=True, slots=True)
class DecisionRow:
    decision: Decision
    outcome: Outcome | None = None
    """What the engine reported, once the gateway posted it (`routing.outcomes`)."""

    @property
    def predicted(self) -> Predicted:
        return predicted(self.decision, knob("BLOCK_SIZE"))

    @property
    def time(self) -> str:
        return datetime.fromtimestamp(self.decision.ts, UTC).strftime("%H:%M:%S.%f")[:-3]

    @property
    def chosen_score(self) -> PodExplanation | None:
        return self.decision.score_of(self.decision.chosen)

    @property
    def chosen_media(self) -> list[Badge]:
        scored = self.chosen_score
        if scored is None:
            return []
        return [badge(medium or None, count) for medium, count in scored.media.items()]

    @property
    def pods(self) -> list[PodLine]:
        return [PodLine.of(self.decision, scored) for scored in self.decision.scores]

    @property
    def estimates(self) -> list[EstimateLine]:
        return [
            EstimateLine(estimate, estimate.pod == self.decision.chosen)
            for estimate in self.decision.estimates
        ]

    @property
    def unscored(self) -> list[str]:
        """Candidates that held nothing of the prefix."""
        scored = {line.pod for line in self.decision.scores}
        return [pod for pod in self.decision.candidates if pod not in scored]


def row_html(decision: Decision) -> SafeString:
    """The feed row of one decision: the same fragment on the page and in live frames."""
    return render_to_string("routing/feed.html#decision", {"row": DecisionRow(decision)})
