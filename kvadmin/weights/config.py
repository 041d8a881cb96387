"""One saved tier-weight configuration: what operators edit, store and export.

A `WeightConfig` is the configured entries only (normalized medium name -> weight), the fallback,
a note per medium and the `ttft` policy's parameters (`ttft`, versioned with the weights). What
scoring uses is `tier_weights()`: the entries merged over kthena's built-in defaults
(compatibility.md 2.5). Keeping the configured entries apart from the effective table is what
lets the page say "kthena default" or "weighs the fallback" for the rest.
"""

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from kvadmin.weights import parameters
from kvadmin.weights.parameters import ParameterChange
from scoring.ttft import DEFAULT_PARAMETERS, TtftParameters
from scoring.weights import (
    DEFAULT_FALLBACK,
    DEFAULT_WEIGHTS,
    KVADMIN_WEIGHTS,
    InvalidTierWeights,
    TierWeights,
    normalize_name,
)

NOTE_MAX_LENGTH = 200


def weight_text(weight: float) -> str:
    """The shortest text that reads back as the same float ("1" for 1.0): what the page and
    the history show, so saving an untouched form never rounds a weight."""
    text = repr(float(weight))
    return text.removesuffix(".0")


@dataclass(frozen=True, slots=True)
class WeightConfig:
    """A valid configuration: build it with `validated` (or `from_json` for stored ones)."""

    weights: Mapping[str, float]
    fallback: float = DEFAULT_FALLBACK
    notes: Mapping[str, str] = field(default_factory=dict)
    ttft: TtftParameters = DEFAULT_PARAMETERS
    """The `ttft` policy's parameters (validated when built, see scoring.ttft)."""

    @classmethod
    def validated(
        cls,
        weights: Mapping[str, object],
        fallback: object = DEFAULT_FALLBACK,
        notes: Mapping[str, str] | None = None,
        ttft: TtftParameters = DEFAULT_PARAMETERS,
    ) -> "WeightConfig":
        """Check `weights` with `TierWeights.from_config` (raises `InvalidTierWeights` naming
        every bad entry) and keep them under their normalized names, sorted. Notes of media
        that are not configured are dropped; blank notes too."""
        effective = TierWeights.from_config(weights, fallback)
        configured = {normalize_name(name): float(w) for name, w in weights.items()}  # type: ignore[arg-type]
        kept_notes = {
            normalize_name(name): note.strip()
            for name, note in (notes or {}).items()
            if note.strip() and normalize_name(name) in configured
        }
        too_long = {
            name: f"the note is longer than {NOTE_MAX_LENGTH} characters"
            for name, note in kept_notes.items()
            if len(note) > NOTE_MAX_LENGTH
        }
        if too_long:
            raise InvalidTierWeights(too_long)
        return cls(
            weights=MappingProxyType(dict(sorted(configured.items()))),
            fallback=effective.fallback,
            notes=MappingProxyType(dict(sorted(kept_notes.items()))),
            ttft=ttft,
        )

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "WeightConfig":
        """A stored configuration (validated again: stored JSON is input too). One saved
        before parameters were versioned has no "ttft": the documented defaults."""
        return cls.validated(
            data.get("weights", {}),
            data.get("fallback", DEFAULT_FALLBACK),
            data.get("notes"),
            parameters.from_json(data.get("ttft")),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "weights": dict(self.weights),
            "fallback": self.fallback,
            "notes": dict(self.notes),
            "ttft": parameters.to_json(self.ttft),
        }

    def with_ttft(self, ttft: TtftParameters) -> "WeightConfig":
        return replace(self, ttft=ttft)

    def tier_weights(self) -> TierWeights:
        return TierWeights.from_config(self.weights, self.fallback)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, WeightConfig):
            return NotImplemented
        return (
            dict(self.weights) == dict(other.weights)
            and self.fallback == other.fallback
            and dict(self.notes) == dict(other.notes)
            and self.ttft == other.ttft
        )

    def __hash__(self) -> int:
        return hash(
            (tuple(self.weights.items()), self.fallback, tuple(self.notes.items()), self.ttft)
        )


KTHENA_DEFAULTS = WeightConfig.validated(dict(DEFAULT_WEIGHTS), DEFAULT_FALLBACK)
"""kthena's defaults (unconfigured media weigh the 1.0 fallback): the kthena-compatible
convention, what applies before anyone saved a version and what migration 0002 seeds as
version 1, in existing and new databases alike."""

KVADMIN_DEFAULTS = WeightConfig.validated(dict(KVADMIN_WEIGHTS), DEFAULT_FALLBACK)
"""kvadmin's defaults: every medium of the media table configured in physical order, the
fallback still kthena's 1.0. An operator adopts them by saving them as a version (the editor
starts from them on request), which exports them to the router like any version."""


@dataclass(frozen=True, slots=True)
class Change:
    """One difference between two configurations, in words an operator reads in the history."""

    medium: str
    """A normalized medium name, or "" for the fallback."""
    before: float | str | None
    after: float | str | None
    what: str
    """"weight", "note" or "fallback"."""

    def __str__(self) -> str:
        if self.what == "fallback":
            return f"fallback {weight_text(self.before)} → {weight_text(self.after)}"
        if self.what == "note":
            return f"{self.medium} note “{self.before or ''}” → “{self.after or ''}”"
        if self.before is None:
            return f"added {self.medium} = {weight_text(self.after)}"
        if self.after is None:
            default = DEFAULT_WEIGHTS.get(self.medium)
            now = f"the default {weight_text(default)}" if default is not None else "the fallback"
            return f"removed {self.medium} (was {weight_text(self.before)}; now weighs {now})"
        return f"{self.medium} {weight_text(self.before)} → {weight_text(self.after)}"


def diff(before: WeightConfig, after: WeightConfig) -> list[Change | ParameterChange]:
    """What changed from `before` to `after`: weights by medium name, then notes, then the
    fallback, then the TTFT parameters."""
    changes = [
        Change(name, before.weights.get(name), after.weights.get(name), "weight")
        for name in sorted(before.weights.keys() | after.weights.keys())
        if before.weights.get(name) != after.weights.get(name)
    ]
    changes += [
        Change(name, before.notes.get(name), after.notes.get(name), "note")
        for name in sorted(before.notes.keys() | after.notes.keys())
        if before.notes.get(name) != after.notes.get(name) and name in after.weights
    ]
    if before.fallback != after.fallback:
        changes.append(Change("", before.fallback, after.fallback, "fallback"))
    return [*changes, *parameters.diff(before.ttft, after.ttft)]
