"""The weights form: rows of (medium, weight, note) as posted, turned into a `WeightConfig`
or into errors pinned to the row and field that caused them.

Form fields: `row` (repeated, one key per row, in display order), and per row key `k`:
`name-k`, `weight-k`, `note-k`, `remove-k` (a checkbox); then `fallback`, `reason` and
`base_version`. Row keys are opaque, so rows can be added in the browser without renumbering.

The TTFT parameters (kvadmin.weights.parameters): `ttft-<field>` for each scalar, and one row
per model speed, `speed` (repeated keys) with `speed_model-k`, `speed_tps-k`, `speed_remove-k`.
A post without `ttft-kappa` (a script that edits only weights) keeps the parameters it is given
(the views give the current version's).

The rules themselves live in `TierWeights.from_config`; this module only turns text into
numbers and maps each error back to its row. Two rows with exactly the same name cannot be
told apart in a mapping, so that one check is made here.
"""

import secrets
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

from kvadmin.engines.model_names import model_name_problem
from kvadmin.weights.config import NOTE_MAX_LENGTH, WeightConfig, weight_text
from kvadmin.weights.parameters import SCALARS, number_text
from kvadmin.weights.versions import REASON_MAX_LENGTH
from scoring.ttft import DEFAULT_PARAMETERS, InvalidTtftParameters, TtftParameters
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
class SpeedRow:
    """One model's prefill speed, as posted."""

    key: str
    model: str = ""
    speed: str = ""
    removed: bool = False
    errors: list[str] = field(default_factory=list)

    @property
    def blank(self) -> bool:
        return not (self.model.strip() or self.speed.strip())


@dataclass(slots=True)
class Draft:
    """What the form holds; `errors` anywhere means it cannot be saved."""

    rows: list[DraftRow]
    fallback: str
    reason: str = ""
    base_version: int | None = None
    fallback_errors: list[str] = field(default_factory=list)
    form_errors: list[str] = field(default_factory=list)
    ttft: dict[str, str] = field(default_factory=dict)
    """The TTFT scalars as text, by field name (`parameters.SCALARS`)."""
    speeds: list[SpeedRow] = field(default_factory=list)
    ttft_errors: dict[str, list[str]] = field(default_factory=dict)
    """Errors of the TTFT scalars, by field name."""
    pod_fits: tuple[tuple[str, float, float], ...] = ()
    """The pods' own fits: calibration's, carried over unchanged (the page shows them)."""
    calibration: str = "auto"
    """`auto` or `manual` (the operator pins the parameters: calibration stops)."""
    config: WeightConfig | None = None
    """The validated configuration, set by `validate` when there are no errors."""

    @property
    def has_errors(self) -> bool:
        return bool(
            self.form_errors
            or self.fallback_errors
            or any(row.errors for row in self.rows)
            or any(self.ttft_errors.values())
            or any(row.errors for row in self.speeds)
        )

    @property
    def ttft_fields(self) -> list[tuple[str, str, str, list[str]]]:
        """(field name, label, text, errors) of each scalar, for the page."""
        return [
            (name, label, self.ttft.get(name, ""), self.ttft_errors.get(name, []))
            for name, label in SCALARS
        ]

    @classmethod
    def from_config(cls, config: WeightConfig, base_version: int) -> "Draft":
        rows = [
            DraftRow(new_row_key(), name, weight_text(weight), config.notes.get(name, ""))
            for name, weight in config.weights.items()
        ]
        draft = cls(rows, weight_text(config.fallback), base_version=base_version)
        draft.set_parameters(config.ttft)
        return draft

    def set_parameters(self, parameters: TtftParameters) -> None:
        """Show `parameters` in the parameter fields (a version's, or fitted ones)."""
        self.ttft = {name: number_text(getattr(parameters, name)) for name, _ in SCALARS}
        self.speeds = [
            SpeedRow(new_row_key(), model, number_text(speed))
            for model, speed in parameters.prefill_tokens_per_s
        ]
        self.pod_fits = parameters.pod_fits
        self.calibration = parameters.calibration
        self.ttft_errors = {}


def new_row_key() -> str:
    return secrets.token_hex(4)


def parse_draft(data: Mapping[str, object], kept: TtftParameters = DEFAULT_PARAMETERS) -> Draft:
    """Read a posted form (a QueryDict or a dict of lists) and validate it. `kept`: the TTFT
    parameters of a post that has no parameter fields."""
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
    if _getlist(data, "ttft-kappa"):
        draft.ttft = {name: _get(data, f"ttft-{name}") for name, _ in SCALARS}
        draft.speeds = [
            SpeedRow(
                key=key,
                model=_get(data, f"speed_model-{key}"),
                speed=_get(data, f"speed_tps-{key}"),
                removed=bool(_get(data, f"speed_remove-{key}")),
            )
            for key in dict.fromkeys(_getlist(data, "speed"))
        ]
        draft.pod_fits = kept.pod_fits
        draft.calibration = _get(data, "ttft-calibration") or kept.calibration
    else:
        draft.set_parameters(kept)
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
    parameters = _parameters(draft)
    if not draft.has_errors and fallback is not None and parameters is not None:
        draft.config = WeightConfig.validated(
            weights, fallback, {row.name: row.note for row in kept}, parameters
        )


def _parameters(draft: Draft) -> TtftParameters | None:
    """The draft's TTFT parameters, or None with each error beside its field. The rules are
    TtftParameters' own; only text to numbers and model names are checked here."""
    if len(draft.speeds) > MAX_ROWS:
        draft.form_errors.append(f"at most {MAX_ROWS} model speeds")
    scalars: dict[str, float] = {}
    for name, label in SCALARS:
        errors = draft.ttft_errors.setdefault(name, [])
        value = _number(draft.ttft.get(name, ""), errors, label, "")
        if value is not None:
            scalars[name] = value
    kept = [row for row in draft.speeds if not row.removed and not row.blank]
    speeds: list[tuple[str, float]] = []
    for row in kept:
        if problem := model_name_problem(row.model):
            row.errors.append(problem)
        speed = _number(row.speed, row.errors, "tokens per second", "")
        if not row.errors and speed is not None:
            speeds.append((row.model, speed))
    for model, count in Counter(row.model for row in kept).items():
        if count > 1:
            for row in kept:
                if row.model == model and "listed twice" not in row.errors:
                    row.errors.append("listed twice")
    # The parameter rules check every number given; a field that is not one already has its
    # error and stands in as its default.
    given = {name: getattr(DEFAULT_PARAMETERS, name) for name, _ in SCALARS} | scalars
    try:
        parameters = TtftParameters(
            **given,  # type: ignore[arg-type]
            prefill_tokens_per_s=tuple(speeds),
            pod_fits=draft.pod_fits,
            calibration=draft.calibration,
        )
    except InvalidTtftParameters as invalid:
        by_key = {f"prefill_tokens_per_s[{row.model!r}]": row for row in kept}
        for key, reason in invalid.errors.items():
            if key in by_key:
                by_key[key].errors.append(reason)
            elif key in draft.ttft_errors:
                draft.ttft_errors[key].append(reason)
            else:
                draft.form_errors.append(f"{key}: {reason}")
        return None
    complete = len(scalars) == len(SCALARS) and not any(row.errors for row in kept)
    return parameters if complete else None


def _problems(weights: dict[str, object], fallback: float) -> dict[str, str]:
    """The weights and the fallback are checked apart: a medium may be named "fallback"."""
    try:
        TierWeights.from_config(weights, fallback)
    except InvalidTierWeights as error:
        return error.errors
    return {}


def _number(
    text: str, errors: list[str], what: str, bounds: str = " between 0 and 1"
) -> float | None:
    """Form text to a float, or None with the reason appended. "nan" and "inf" become floats
    that the weight (or parameter) rules then reject with their own words."""
    text = text.strip()
    if not text:
        errors.append(f"enter {what}{bounds}")
        return None
    try:
        number = float(text)
    except ValueError:
        errors.append(f"must be a number{bounds}, got {text[:40]!r}")
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
