"""The /explain/ page: what the index holds for one request, block by block, and why each pod
scores what it does.

The scores come from `kvadmin.routing.service.scored` itself (not recorded), so they are the
ones POST /api/v1/score returns for the same input, and so are the block hashes the grid's
columns stand for: the page never tokenizes or hashes the request again. It adds what the score
walk does not read: per block, every owner with its medium (non-candidates and blocks past
the walk's stop included), read with ONE pipelined HGETALL over the request's block keys, as
kthena's reader does.
"""

import json
from dataclasses import dataclass

import msgspec
from django import forms

from kvadmin.engines.model_names import validate_model_name
from kvadmin.engines.models import Engine
from kvadmin.index.groups import group_of
from kvadmin.media import medium_class, medium_label
from kvadmin.residency.listing import owners_by_block
from kvadmin.routing import outcomes, service
from kvadmin.routing.decisions import Decision, PodExplanation
from kvadmin.untrusted_json import InvalidJson, decode_json
from scoring.values import BlockValue

INPUTS = (
    ("token_ids", "Token ids"),
    ("prompt", "Prompt (tokenized by the model's engines)"),
    ("messages", "Chat messages (JSON)"),
)
_FIELDS = {"model": "model", "pods": "pods"} | dict.fromkeys([name for name, _ in INPUTS], "text")
"""Form field of each field the score service can blame."""


class ExplainForm(forms.Form):
    model = forms.ChoiceField(validators=[validate_model_name])
    input = forms.ChoiceField(choices=INPUTS, initial="token_ids", widget=forms.RadioSelect)
    text = forms.CharField(
        strip=False,  # a prompt is tokenized as typed: a trailing space is a token
        widget=forms.Textarea(attrs={"rows": 6}),
        help_text='Token ids: "1, 2, 3" or a JSON list. '
        'Messages: [{"role": "user", "content": "..."}]',
    )
    pods = forms.CharField(
        required=False,
        label="Candidate pods",
        help_text="Comma-separated; empty: every enabled engine serving the model.",
    )

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        models = Engine.objects.values_list("model", flat=True).distinct().order_by("model")
        self.fields["model"].choices = [(model, model) for model in models]

    def clean(self) -> dict:
        data = super().clean() or {}
        text, kind = data.get("text"), data.get("input")
        if text is None or kind is None:
            return data
        try:
            data["value"] = _parsed(kind, text)
        except ValueError as error:
            self.add_error("text", str(error))
        data["pod_list"] = [p for p in data.get("pods", "").replace(",", " ").split() if p] or None
        return data


def _parsed(kind: str, text: str) -> object:
    """Form text as the JSON value the API would receive; the service validates the rest."""
    if kind == "prompt":
        return text.replace("\r\n", "\n")  # browsers send a textarea's line breaks as CRLF
    if kind == "messages":
        try:
            return decode_json(text)
        except InvalidJson as error:
            raise ValueError(f"messages must be JSON: {error}") from None
    stripped = text.strip()
    if stripped.startswith("["):
        try:
            return decode_json(stripped)
        except InvalidJson as error:
            raise ValueError(f"token ids must be a JSON list or comma-separated: {error}") from None
    parts = stripped.replace(",", " ").split()
    if not all(part.isascii() and part.isdigit() for part in parts):
        raise ValueError("token ids are non-negative integers, separated by commas or spaces")
    return [int(part) for part in parts]


@dataclass(frozen=True, slots=True)
class Cell:
    value: BlockValue | None
    """The pod's value on this block's key; None when it does not hold it."""
    matched: bool
    """Part of the pod's scored run."""

    @property
    def css(self) -> str:
        held = medium_class(self.value.medium) if self.value else ""
        return f"{held} matched".strip() if self.matched else held

    @property
    def title(self) -> str:
        if self.value is None:
            return "not held"
        return f"{medium_label(self.value.medium)}, written at {self.value.timestamp}"


@dataclass(slots=True)
class GridRow:
    pod: str
    candidate: bool
    scored: PodExplanation | None
    stale: bool
    cells: list[Cell]

    @property
    def stops_at(self) -> int:
        """The first block of the request the pod's run does not cover."""
        return self.scored.matched_blocks if self.scored else 0

    @property
    def terms(self) -> list[tuple[str | None, int]]:
        return list(self.scored.runs) if self.scored else []


@dataclass(slots=True)
class Explanation:
    decision: Decision
    blocks: list[int]
    rows: list[GridRow]
    api: str
    """The decision as POST /api/v1/score returns it (pretty JSON)."""


def explain_request(form: ExplainForm) -> Explanation | None:
    """Score the form's request like the API (without recording it) and lay out the grid;
    None when the form is invalid (its errors say why, the service's included)."""
    if not form.is_valid():
        return None
    data = form.cleaned_data
    model, kind, value = data["model"], data["input"], data["value"]
    try:
        scored = service.scored(model, pods=data["pod_list"], record=False, **{kind: value})
    except service.ScoreError as error:
        form.add_error(_FIELDS.get(error.field or ""), error.message)
        return None
    decision = scored.decision
    return Explanation(
        decision=decision,
        blocks=scored.blocks,
        rows=_grid(model, scored.blocks, decision),
        api=json.dumps(msgspec.to_builtins(outcomes.decision_answer(decision)), indent=2),
    )


def _grid(model: str, blocks: list[int], decision: Decision) -> list[GridRow]:
    """Rows: scored pods best first, other candidates, then owners that are not candidates.
    Columns: the request's blocks. One pipelined HGETALL for every block key."""
    owners = owners_by_block(group_of(model).client(), model, blocks)
    held: dict[str, dict[int, BlockValue]] = {}
    for position, block_owners in enumerate(owners):
        for owner in block_owners:
            held.setdefault(owner.pod, {})[position] = owner.value
    scored = {line.pod: line for line in decision.scores}
    candidates = set(decision.candidates)
    order = [line.pod for line in decision.scores]
    order += sorted(candidates - set(order))
    order += sorted(set(held) - candidates)
    stale = set(decision.dropped.stale)
    rows = []
    for pod in order:
        matched = scored[pod].matched_blocks if pod in scored else 0
        values = held.get(pod, {})
        cells = [Cell(values.get(i), i < matched) for i in range(len(blocks))]
        rows.append(GridRow(pod, pod in candidates, scored.get(pod), pod in stale, cells))
    return rows
