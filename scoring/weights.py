"""Tier weights (compatibility.md 2.5) and the media engines report (compatibility.md 3).

A block held in GPU memory saves more prefill than one that must first be copied back from host
memory or disk, so each matched block counts with the weight of its medium. kthena silently
ignores out-of-range weights; kvadmin rejects a configuration naming every bad entry and applies
nothing of it, which `TierWeights` guarantees by validating in its constructor and never changing
afterwards.
"""

import math
import numbers
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from types import MappingProxyType
from typing import Final, NoReturn


@dataclass(frozen=True, slots=True)
class Medium:
    """One medium engines report, as they spell it."""

    name: str
    engines: str
    meaning: str
    kvadmin_weight: float
    """kvadmin's own default (`KVADMIN_WEIGHTS`): every medium weighed by where it sits."""
    default_weight: float | None = None
    """kthena's built-in weight (compatibility.md 2.5); None: the medium weighs the fallback."""
    tier_order: int | None = None
    """Position in the fixed order that breaks weight ties (0 is best); None for the others,
    which rank after the ordered ones alphabetically."""


MEDIA: Final[tuple[Medium, ...]] = (
    Medium("GPU", "vLLM core scheduler, SGLang", "GPU prefix cache (HBM)", 1.0, 1.0, 0),
    Medium("CPU_PINNED", "SGLang", "pinned host memory", 0.8, 0.8, 1),
    Medium("CPU", "vLLM offloading connector, LMCache", "host memory tier", 0.8, 0.8, 2),
    Medium("DISK", "SGLang", "local SSD", 0.4, None, 3),
    Medium("EXTERNAL", "SGLang", "shared remote pool", 0.2),
    Medium("CPU_TIER1", "SGLang (older)", "host memory tier, older name", 0.8),
    Medium("CPU_TIER2", "SGLang (older)", "second host memory tier, older name", 0.4),
    Medium("FS", "vLLM offloading connector (v0.26)", "file-system tier", 0.4),
    Medium("OBJ", "vLLM offloading connector (v0.26)", "object-store tier", 0.2),
    Medium("STORAGE", "vLLM offloading connector (later)", "file-system tier, later name", 0.4),
    Medium("SHARED_STORAGE", "others", "shared storage; any other string weighs the fallback", 0.2),
)
"""docs/compatibility.md section 3, the one table of media. A missing medium (legacy values, "ts|")
is not in it: it weighs the fallback like any unknown medium."""

DEFAULT_WEIGHTS: Final[Mapping[str, float]] = MappingProxyType(
    {m.name.lower(): m.default_weight for m in MEDIA if m.default_weight is not None}
)
"""kthena's built-in weights: what `TierWeights` merges a configuration over, as kthena does."""
DEFAULT_FALLBACK: Final = 1.0
"""kthena's fixed fallback, for unconfigured, unknown and missing media."""

KVADMIN_WEIGHTS: Final[Mapping[str, float]] = MappingProxyType(
    dict(sorted((m.name.lower(), m.kvadmin_weight) for m in MEDIA))
)
"""kvadmin's own defaults: every medium of the table configured in physical order (GPU >
CPU_PINNED = CPU > DISK/FS/STORAGE > OBJ/EXTERNAL/SHARED_STORAGE; SGLang's older CPU_TIER1 and
CPU_TIER2 as CPU_PINNED and DISK), so the 1.0 fallback is left to media no engine documents.
The storage values follow llm-d's (0.4 local storage, 0.2 remote). Exported as a configuration,
kthena scores them identically: its fallback is unchanged."""

_TIER_ORDER: Final = {m.name: m.tier_order for m in MEDIA if m.tier_order is not None}
_UNORDERED = len(_TIER_ORDER)
_MEMO_LIMIT = 256


class InvalidTierWeights(ValueError):
    """A tier-weight configuration with at least one bad entry; `errors` maps every bad entry's
    name (as given; "fallback" for the fallback weight) to the reason."""

    def __init__(self, errors: Mapping[str, str]) -> None:
        self.errors = dict(errors)
        details = "; ".join(f"{name!r}: {reason}" for name, reason in self.errors.items())
        super().__init__(f"invalid tier weights, nothing applied: {details}")


def normalize_name(medium: str) -> str:
    """The name weights are matched on: trimmed and lower-cased (`" Cpu_Pinned "` is
    `cpu_pinned`), as kthena exports and matches them."""
    return medium.strip().lower()


class TierWeights:
    """An immutable weight table: the defaults with configured entries merged over them, and
    the fallback for missing, empty and unconfigured media.

    Equality compares the effective table, so configuring a default explicitly changes nothing
    and two tables loaded from different stored versions compare equal when they score alike.
    """

    __slots__ = ("_weights", "_fallback", "_memo")
    _weights: Mapping[str, float]
    _fallback: float
    _memo: dict[str | None, float]

    def __init__(
        self, config: Mapping[str, object] | None = None, fallback: object = DEFAULT_FALLBACK
    ) -> None:
        configured, checked_fallback = _validated(config or {}, fallback)
        merged = dict(sorted({**DEFAULT_WEIGHTS, **configured}.items()))
        object.__setattr__(self, "_weights", MappingProxyType(merged))
        object.__setattr__(self, "_fallback", checked_fallback)
        object.__setattr__(self, "_memo", {})

    @classmethod
    def from_config(
        cls, config: Mapping[str, object], fallback: object = DEFAULT_FALLBACK
    ) -> "TierWeights":
        """Validate `config` (medium name -> weight) and merge it over the defaults.

        Raises `InvalidTierWeights` naming every bad entry: a weight outside [0, 1], NaN or
        infinite; a value that is not a number (bools and text such as "0.5" or "nan" are
        rejected: turning form text into numbers belongs to the form, which can then point at
        the field); an empty or blank name; names equal after trimming and lower-casing.
        """
        return cls(config, fallback)

    def __setattr__(self, name: str, value: object) -> NoReturn:
        raise AttributeError("TierWeights is immutable; build a new one")

    def __delattr__(self, name: str) -> NoReturn:
        raise AttributeError("TierWeights is immutable; build a new one")

    def __reduce__(self) -> tuple[type["TierWeights"], tuple[dict[str, float], float]]:
        return TierWeights, (dict(self._weights), self._fallback)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TierWeights):
            return NotImplemented
        return self._weights == other._weights and self._fallback == other._fallback

    def __hash__(self) -> int:
        return hash((tuple(self._weights.items()), self._fallback))

    def __repr__(self) -> str:
        return f"TierWeights({dict(self._weights)!r}, fallback={self._fallback!r})"

    @property
    def weights(self) -> Mapping[str, float]:
        """Every configured or default weight by normalized name, sorted by name."""
        return self._weights

    @property
    def fallback(self) -> float:
        return self._fallback

    @property
    def kthena_compatible(self) -> bool:
        """kthena's fallback is fixed at 1.0: with another one, the router scores unknown
        media differently from kvadmin, whatever is exported."""
        return self._fallback == DEFAULT_FALLBACK

    def weight_for(self, medium: str | None) -> float:
        """The weight of one matched block in `medium` (None or "" for no medium)."""
        weight = self._memo.get(medium)
        if weight is None:
            name = normalize_name(medium) if medium else ""
            weight = self._weights.get(name, self._fallback)
            if len(self._memo) < _MEMO_LIMIT:  # engines report few media; bound odd inputs
                self._memo[medium] = weight
        return weight

    def medium_rank(self, medium: str | None) -> tuple[float, int, str, str]:
        """Sort key putting the best medium first: the highest weight, then the fixed tier order
        GPU, CPU_PINNED, CPU, DISK, then other media alphabetically, then no medium."""
        name = medium.strip().upper() if medium else ""
        order = _TIER_ORDER.get(name, _UNORDERED if name else _UNORDERED + 1)
        return (-self.weight_for(medium), order, name, medium or "")

    def best_medium(self, media: Iterable[str | None]) -> str | None:
        """The medium a block held in all of `media` is best served from (ValueError if none)."""
        return min(media, key=self.medium_rank)

    def as_kthena_config(self) -> dict[str, float]:
        """The router's `args.tierWeights` (compatibility.md 2.5): lower-case names, defaults
        included."""
        return dict(self._weights)


def _validated(config: Mapping[str, object], fallback: object) -> tuple[dict[str, float], float]:
    if not isinstance(config, Mapping):
        raise TypeError(f"tier weights must be a mapping, got {type(config).__name__}")
    problems: dict[str, list[str]] = {}
    weights: dict[str, float] = {}
    spellings: dict[str, list[str]] = {}
    for name, value in config.items():
        if not isinstance(name, str):
            problems.setdefault(str(name), []).append("the name must be text")
            continue
        reasons = problems.setdefault(name, [])
        key = normalize_name(name)
        if key:
            spellings.setdefault(key, []).append(name)
        else:
            reasons.append("the name is empty")
        weight, reason = _checked_weight(value)
        if reason:
            reasons.append(reason)
        elif key:
            weights[key] = weight
    for names in spellings.values():
        for name in names if len(names) > 1 else ():
            others = ", ".join(repr(other) for other in names if other != name)
            problems[name].append(f"the same medium as {others} (names ignore case and spaces)")
    checked_fallback, reason = _checked_weight(fallback)
    if reason:
        problems.setdefault("fallback", []).append(reason)
    errors = {name: "; ".join(reasons) for name, reasons in problems.items() if reasons}
    if errors:
        raise InvalidTierWeights(errors)
    return weights, checked_fallback


def _checked_weight(value: object) -> tuple[float, str | None]:
    """The weight as a float in [0, 1], or the reason it is not one."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real | Decimal):
        return 0.0, f"must be a number, got {type(value).__name__} {value!r}"
    try:
        weight = float(value)
    except (ValueError, OverflowError):  # Decimal("sNaN"), ints beyond float range
        return 0.0, f"must be a number between 0 and 1, got {value!r}"
    if math.isnan(weight):
        return 0.0, "must be a number between 0 and 1, got NaN"
    if not 0.0 <= weight <= 1.0:
        return 0.0, f"must be between 0 and 1, got {value!r}"
    return weight + 0.0, None  # + 0.0 turns -0.0 into 0.0


@dataclass(frozen=True, slots=True)
class MediaPreference:
    """Which medium the matrix value names when a pod holds a block in several (compatibility.md
    5.4).

    `best_first` lists media best first, compared case-insensitively after trimming
    (compatibility.md 2.5). Every other medium, and no medium, ranks at `fallback_position` (an
    index into `best_first`: 0 = before all of them, len = after all). Equal ranks are ordered by
    name, so the choice never depends on arrival order.
    """

    best_first: tuple[str, ...]
    fallback_position: int

    def __post_init__(self) -> None:
        names = tuple(normalize_name(m) for m in self.best_first)
        if len(set(names)) != len(names):
            raise ValueError(f"media listed twice: {self.best_first}")
        if not 0 <= self.fallback_position <= len(names):
            raise ValueError(f"fallback_position must be within 0..{len(names)}")
        object.__setattr__(self, "best_first", names)

    @classmethod
    def from_tier_weights(cls, weights: TierWeights) -> "MediaPreference":
        """The order of `TierWeights.medium_rank`: the heaviest medium first, ties by the fixed
        tier order. Media that rank like an unknown one (the fallback weight and no fixed
        order) are left out of the list: the script orders those by name, as medium_rank does.
        """
        unknown = weights.medium_rank("?")[:2]
        named = {m.name.lower() for m in MEDIA if m.tier_order is not None} | set(weights.weights)
        listed = sorted(
            (m for m in named if weights.medium_rank(m)[:2] != unknown), key=weights.medium_rank
        )
        position = sum(1 for m in listed if weights.medium_rank(m)[:2] < unknown)
        return cls(tuple(listed), position)


DEFAULT_PREFERENCE = MediaPreference.from_tier_weights(TierWeights())
"""With kthena's default weights: GPU, then DISK and any other medium at the 1.0 fallback, then
CPU_PINNED and CPU at 0.8."""
