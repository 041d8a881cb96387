"""What the page lists: the configured media (the draft's rows) and every other medium that
matters, with where its weight comes from."""

from dataclasses import dataclass

from kvadmin.weights.config import WeightConfig, weight_text
from kvadmin.weights.draft import Draft, DraftRow
from kvadmin.weights.seen import SeenMedium
from scoring.weights import DEFAULT_WEIGHTS, normalize_name

KTHENA_DEFAULT = "kthena default"
FALLBACK = "weighs the fallback"


@dataclass(frozen=True, slots=True)
class OtherMedium:
    """A medium with no configured entry: a kthena default, or seen in the index."""

    name: str
    """Normalized; "" for blocks stored without a medium."""
    weight: float
    source: str
    seen: SeenMedium | None

    @property
    def weight_text(self) -> str:
        return weight_text(self.weight)

    @property
    def configurable(self) -> bool:
        return bool(self.name)


def editor_rows(draft: Draft, seen: dict[str, SeenMedium]) -> list[tuple[DraftRow, SeenMedium]]:
    """Each draft row with what the index holds in that medium (None when nothing)."""
    return [(row, seen.get(normalize_name(row.name))) for row in draft.rows]


def other_media(config: WeightConfig, seen: dict[str, SeenMedium]) -> list[OtherMedium]:
    """Defaults the configuration leaves alone, then media seen in the index that nobody
    configured ("weighs the fallback")."""
    defaults = [
        OtherMedium(name, weight, KTHENA_DEFAULT, seen.get(name))
        for name, weight in DEFAULT_WEIGHTS.items()
        if name not in config.weights
    ]
    unconfigured = [
        OtherMedium(name, config.fallback, FALLBACK, entry)
        for name, entry in seen.items()
        if name not in config.weights and name not in DEFAULT_WEIGHTS
    ]
    return sorted(defaults, key=lambda other: other.name) + unconfigured
