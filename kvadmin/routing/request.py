"""A score request, declared once: `ScoreRequest` is what the API's body, `manage.py score`, the
explain page and the gateway's endpoint picker all give, and decoding it (msgspec, in C) is the
validation of its types, lengths, ranges and policy name. `checked` adds what a schema cannot
say: exactly one input, the model name's characters, the SCORE_MAX_TOKENS knob, registered
candidate pods, the text of content parts. kvadmin/api/openapi.py generates the body's schema
from the same struct.

Errors are one exception class per kind, each with the `field` at fault (None when no field
is) and a message, and the HTTP status a view answers with.
"""

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta

from kvadmin.conf import knob
from kvadmin.engines.model_names import model_name_problem
from kvadmin.routing.tokenize import Messages
from scoring.policy import DEFAULT_POLICY, POLICIES, Policy, policy_description

log = logging.getLogger(__name__)

INPUTS = ("token_ids", "prompt", "messages")
MAX_REQUEST_ID = 200
TOKEN_ID_MAX = 2**32 - 1

EngineRow = tuple[str, str, str, int, str, bool]
"""An engine as scoring needs it: pod, kind, HTTP base URL, dp_size, tokenizer, enabled."""
ENGINE_COLUMNS = ("pod", "kind", "http_base_url", "dp_size", "tokenizer", "enabled")


class ScoreError(Exception):
    """A request that cannot be scored. `field`: the request field at fault, if any."""

    status = 400

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field


class InvalidScoreRequest(ScoreError):
    """Bad input (400): a missing model, none or several inputs, bad token ids, too many
    tokens, unknown candidate pods..."""


class ModelNotServed(ScoreError):
    """No engine serves the model (422)."""

    status = 422


class ContentPart(msgspec.Struct, omit_defaults=True):
    """A part of a chat message's content; the text parts count, the others are left out."""

    type: str = "text"
    text: str | None = None


class Message(msgspec.Struct):
    role: str
    content: Annotated[
        str | list[ContentPart],
        Meta(description="Text, or content parts whose text parts count."),
    ]


class ScoreRequest(msgspec.Struct, kw_only=True):
    """Exactly one of token_ids, prompt, messages."""

    model: Annotated[str, Meta(description="The served model name.")]
    token_ids: (
        Annotated[
            list[Annotated[int, Meta(ge=0, le=TOKEN_ID_MAX)]],
            Meta(min_length=1, description="At most KVADMIN_SCORE_MAX_TOKENS (default 262144)."),
        ]
        | None
    ) = None
    prompt: (
        Annotated[str, Meta(min_length=1, description="Tokenized by a candidate engine.")] | None
    ) = None
    messages: (
        Annotated[
            list[Message],
            Meta(min_length=1, description="Chat messages; the engine applies its chat template."),
        ]
        | None
    ) = None
    pods: (
        Annotated[
            list[str],
            Meta(
                min_length=1,
                description="Candidate pods (registered engines of the model). Default: every "
                "enabled engine serving the model.",
            ),
        ]
        | None
    ) = None
    request_id: Annotated[str, Meta(max_length=MAX_REQUEST_ID)] | int | None = None
    policy: (
        Annotated[
            Literal[POLICIES],  # type: ignore[valid-type]  (a tuple of literal names)
            Meta(description=policy_description()),
        ]
        | None
    ) = None


@dataclass(frozen=True, slots=True)
class Candidate:
    pod: str
    kind: str
    http_base_url: str
    dp_size: int
    tokenizer: str


@dataclass(frozen=True, slots=True)
class Checked:
    """A score request `checked` against what a schema cannot say, with its candidates."""

    model: str
    source: str
    """Which input was given: one of INPUTS."""
    token_ids: list[int] | None
    prompt: str | None
    messages: Messages | None
    request_id: str | None
    policy: Policy
    candidates: list[Candidate]

    @property
    def pods(self) -> list[str]:
        return [candidate.pod for candidate in self.candidates]


def request_of(model: object, **fields: Any) -> ScoreRequest:
    """A `ScoreRequest` from JSON values (the CLI's, the explain form's), validated as a body
    is; InvalidScoreRequest naming the field at fault."""
    try:
        return msgspec.convert({"model": model, **fields}, ScoreRequest)
    except msgspec.ValidationError as error:
        raise named(str(error)) from None


def checked(request: ScoreRequest, engines: Sequence[EngineRow]) -> Checked:
    """`request` with its candidates among the model's registered `engines`; raises a
    ScoreError for what the schema cannot say."""
    if problem := model_name_problem(request.model):
        raise InvalidScoreRequest(f"`model` (the served model name): {problem}", "model")
    source = _one_input(request)
    limit = knob("SCORE_MAX_TOKENS")
    if request.token_ids is not None and len(request.token_ids) > limit:
        raise InvalidScoreRequest(
            f"`token_ids` has {len(request.token_ids)} tokens; the limit is {limit}", "token_ids"
        )
    request_id = request.request_id
    return Checked(
        model=request.model,
        source=source,
        token_ids=request.token_ids,
        prompt=request.prompt,
        messages=None if request.messages is None else _messages(request.messages),
        request_id=None if request_id is None else str(request_id),
        policy=request.policy or _configured_policy(),
        candidates=_candidates(request.model, request.pods, engines),
    )


def _one_input(request: ScoreRequest) -> str:
    given = [name for name in INPUTS if getattr(request, name) is not None]
    if len(given) != 1:
        names = ", ".join(f"`{name}`" for name in INPUTS)
        found = f" (got {', '.join(given)})" if given else ""
        raise InvalidScoreRequest(
            f"exactly one of {names} is required{found}", given[-1] if given else "token_ids"
        )
    return given[0]


def _messages(messages: list[Message]) -> Messages:
    """Chat messages with string contents; list contents keep their text parts joined with
    newlines, as kthena sends them (compatibility.md 2.6)."""
    return [
        {
            "role": message.role,
            "content": message.content
            if isinstance(message.content, str)
            else "\n".join(
                part.text
                for part in message.content
                if part.type == "text" and part.text is not None
            ),
        }
        for message in messages
    ]


def _configured_policy() -> Policy:
    """The ROUTING_POLICY knob's policy."""
    configured = knob("ROUTING_POLICY")
    if configured not in POLICIES:
        # A misconfiguration must not turn every scoring into a 500: say so, route anyway.
        log.error("KVADMIN_ROUTING_POLICY %r is not one of %s", configured, POLICIES)
        return DEFAULT_POLICY
    return configured


def _candidates(
    model: str, requested: list[str] | None, rows: Sequence[EngineRow]
) -> list[Candidate]:
    """The candidates among the model's registered engines `rows`."""
    if requested is None:
        enabled = [Candidate(*row[:-1]) for row in rows if row[-1]]
        if not enabled:
            raise ModelNotServed(f"no enabled engine serves model {model!r}", "model")
        return enabled
    if not rows:
        raise ModelNotServed(f"no engine serves model {model!r}", "model")
    engines = {row[0]: row for row in rows}
    requested = list(dict.fromkeys(requested))
    unknown = [pod for pod in requested if pod not in engines]
    if unknown:
        raise InvalidScoreRequest(
            f"unknown candidate pods for model {model!r}: {', '.join(unknown)}", "pods"
        )
    return [Candidate(*engines[pod][:-1]) for pod in requested]


_AT = re.compile(r" - at `\$((?:\.\w+|\[\d+\])*)`$")
_MISSING = re.compile(r"Object missing required field `(\w+)`")


def named(message: str) -> InvalidScoreRequest:
    """msgspec's message with its path first: "`token_ids[3]`: Expected `int >= 0`..."."""
    at = _AT.search(message)
    path = at.group(1).lstrip(".") if at else ""
    what = message[: at.start()] if at else message
    if missing := _MISSING.match(what):
        path = f"{path}.{missing.group(1)}".lstrip(".") if path else missing.group(1)
    field = re.match(r"\w+", path)
    if not path:
        return InvalidScoreRequest(f"the body must be a JSON object: {what}")
    name = field.group(0) if field else None
    if name not in ScoreRequest.__struct_fields__:
        name = None
    if name == "policy":  # msgspec names the value, not the choices
        what += f" (one of {', '.join(POLICIES)})"
    elif name == "token_ids" and path != name:
        what += f" (token ids are integers from 0 to {TOKEN_ID_MAX})"
    return InvalidScoreRequest(f"`{path}`: {what}", name)
