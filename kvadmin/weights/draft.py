"""The weights form: rows of (medium, weight, note) as posted, turned into a `WeightConfig`
or into errors pinned to the row and field that caused them.

Form fields: `row` (repeated, one key per row, in display order), and per row key `k`:
`name-k`, `weight-k`, `note-k`, `remove-k` (a checkbox); then `fallback`, `reason` and
`base_version`. Row keys are opaque, so rows can be added in the browser without renumbering.

The rules themselves live in `TierWeights.from_config`; this module only turns text into
numbers and maps each error back to its row. Two rows with exactly the same name cannot be
told apart in a mapping, so that one check is made here.
"""

import secrets
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

from kvadmin.weights.config import NOTE_MAX_LENGTH, WeightConfig, weight_text
from kvadmin.weights.versions import REASON_MAX_LENGTH
from scoring.weights import InvalidTierWeights, TierWeights

MAX_ROWS = 64
NAME_MAX_LENGTH = 64


@dataclass(slots=True)
class DraftRow:
    key: str
    name: str = ""
    weight: str = ""
    note: str = ""
    removed: bool = False
    errors: list[str] = field(default_factory=list)

    @property
    def blank(self) -> bool:
        return not (self.name.strip() or self.weight.strip() or self.note.strip())


@dataclass(slots=True)
class Draft:
    """What the form holds; `errors` anywhere means it cannot be saved."""

    rows: list[DraftRow]
    fallback: str
    reason: str = ""
    base_version: int | None = None
    fallback_errors: list[str] = field(default_factory=list)
    form_errors: list[str] = field(default_factory=list)
    config: WeightConfig | None = None
    """The validated configuration, set by `validate` when there are no errors."""

    @property
    def has_errors(self) -> bool:
        return bool(
            self.form_errors or self.fallback_errors or any(row.errors for row in self.rows)
        )

    @classmethod
    def from_config(cls, config: WeightConfig, base_version: int) -> "Draft":
        rows = [
            DraftRow(new_row_key(), name, weight_text(weight), config.notes.get(name, ""))
            for name, weight in config.weights.items()
        ]
        return cls(rows, weight_text(config.fallback), base_version=base_version)


def new_row_key() -> str:
    return secrets.token_hex(4)


def parse_draft(data: Mapping[str, object]) -> Draft:
    """Read a posted form (a QueryDict or a dict of lists) and validate it."""
    keys = _getlist(data, "row")
    rows = [
        DraftRow(
            key=key,
            name=_get(data, f"name-{key}"),
            weight=_get(data, f"weight-{key}"),
            note=_get(data, f"note-{key}"),
            removed=bool(_get(data, f"remove-{key}")),
        )
        for key in dict.fromkeys(keys)  # a key posted twice is one row
    ]
    draft = Draft(
        rows=rows,
        fallback=_get(data, "fallback"),
        reason=_get(data, "reason"),
        base_version=_int_or_none(_get(data, "base_version")),
    )
    validate(draft)
    return draft


def validate(draft: Draft) -> None:
    """Fill the errors of `draft`, or its `config` when there are none."""
    if len(draft.rows) > MAX_ROWS:
        draft.form_errors.append(f"at most {MAX_ROWS} media")
    kept = [row for row in draft.rows if not row.removed and not row.blank]
    fallback = _number(draft.fallback, draft.fallback_errors, "the fallback")
    if fallback is not None:
        draft.fallback_errors += _problems({}, fallback).values()
    weights: dict[str, object] = {}
    for row in kept:
        if len(row.name) > NAME_MAX_LENGTH:
            row.errors.append(f"the name is longer than {NAME_MAX_LENGTH} characters")
        if len(row.note.strip()) > NOTE_MAX_LENGTH:
            row.errors.append(f"the note is longer than {NOTE_MAX_LENGTH} characters")
        weight = _number(row.weight, row.errors, "a weight")
        # A row whose weight is not a number still takes part in the name checks.
        weights[row.name] = weight if weight is not None else 0.0
    for name, count in Counter(row.name for row in kept).items():
        if count > 1 and name.strip():
            for row in kept:
                if row.name == name:
                    row.errors.append("listed twice")
    problems = _problems(weights, 1.0)
    for row in kept:
        if row.name in problems and problems[row.name] not in row.errors:
            row.errors.append(problems[row.name])
    if len(draft.reason.strip()) > REASON_MAX_LENGTH:
        draft.form_errors.append(f"the reason is longer than {REASON_MAX_LENGTH} characters")
    if not draft.has_errors and fallback is not None:
        draft.config = WeightConfig.validated(
            weights, fallback, {row.name: row.note for row in kept}
        )


def _problems(weights: dict[str, object], fallback: float) -> dict[str, str]:
    """The weights and the fallback are checked apart: a medium may be named "fallback"."""
    try:
        TierWeights.from_config(weights, fallback)
    except InvalidTierWeights as error:
        return error.errors
    return {}


def _number(text: str, errors: list[str], what: str) -> float | None:
    """Form text to a float, or None with the reason appended. "nan" and "inf" become floats
    that the weight rules then reject with their own words."""
    text = text.strip()
    if not text:
        errors.append(f"enter {what} between 0 and 1")
        return None
    try:
        number = float(text)
    except ValueError:
        errors.append(f"must be a number between 0 and 1, got {text!r}")
        return None
    return number


def _get(data: Mapping[str, object], name: str) -> str:
    values = _getlist(data, name)
    return values[-1] if values else ""


def _getlist(data: Mapping[str, object], name: str) -> list[str]:
    getlist = getattr(data, "getlist", None)
    if getlist is not None:
        return [str(value) for value in getlist(name)]
    value = data.get(name)
    if value is None:
        return []
    return [str(v) for v in value] if isinstance(value, list | tuple) else [str(value)]


def _int_or_none(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None
