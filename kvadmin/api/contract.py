"""The body of POST /api/v1/score, declared once: msgspec decodes bodies into `ScoreRequest`
(types and limits checked in C, token ids straight into ints), and kvadmin/api/openapi.py
generates its schema from the same struct. `routing.service` checks what a schema cannot
say (exactly one input, the model name's characters, the SCORE_MAX_TOKENS knob, registered
pods).

A body the struct refuses is decoded again the careful way (`untrusted_json.decode_json`),
so deep nesting and bad UTF-8 are named as such; otherwise msgspec's own message is answered
with the field at fault.
"""

import re
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta

from kvadmin.routing.service import INPUTS, MAX_REQUEST_ID
from kvadmin.untrusted_json import InvalidJson, decode_json
from scoring.policy import POLICIES

TOKEN_ID_MAX = 2**32 - 1


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
            Meta(
                description="How `chosen` is picked: `ttft`, the lowest estimated time to first "
                "token (predicted wait + prefill estimate + work penalty); `kthena`, the highest "
                "score, as kthena's plugin alone picks. Default: the KVADMIN_ROUTING_POLICY "
                "knob (`ttft`). Scores are the same under both."
            ),
        ]
        | None
    ) = None

    def arguments(self) -> dict[str, Any]:
        """The keyword arguments of `routing.service.score` (JSON values, as it takes them)."""
        messages = self.messages
        return {
            "token_ids": self.token_ids,
            "prompt": self.prompt,
            "messages": None if messages is None else msgspec.to_builtins(messages),
            "pods": self.pods,
            "request_id": self.request_id,
            "policy": self.policy,
        }


class InvalidBody(ValueError):
    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field


_decoder = msgspec.json.Decoder(ScoreRequest)
_AT = re.compile(r" - at `\$((?:\.\w+|\[\d+\])*)`$")
_MISSING = re.compile(r"Object missing required field `(\w+)`")


def decode_score_request(raw: bytes) -> ScoreRequest:
    """The request in `raw`; InvalidBody naming the field at fault (None: the whole body)."""
    try:
        return _decoder.decode(raw)
    except msgspec.ValidationError as error:
        refused: str | None = str(error)
    except (msgspec.DecodeError, RecursionError, UnicodeDecodeError):
        refused = None
    try:
        decode_json(raw)  # names nesting, bad UTF-8 and syntax errors as the careful decoder does
    except InvalidJson as invalid:
        raise InvalidBody(f"the body is not valid JSON: {invalid}") from None
    raise _named(refused or "not a score request")


def _named(message: str) -> InvalidBody:
    """msgspec's message with its path first: "`token_ids[3]`: Expected `int >= 0`..."."""
    at = _AT.search(message)
    path = at.group(1).lstrip(".") if at else ""
    what = message[: at.start()] if at else message
    if missing := _MISSING.match(what):
        path = f"{path}.{missing.group(1)}".lstrip(".") if path else missing.group(1)
    field = re.match(r"\w+", path)
    if not path:
        return InvalidBody(f"the body must be a JSON object: {what}")
    name = field.group(0) if field else None
    if name not in (*INPUTS, *ScoreRequest.__struct_fields__):
        name = None
    if name == "policy":  # msgspec names the value, not the choices
        what += f" (one of {', '.join(POLICIES)})"
    return InvalidBody(f"`{path}`: {what}", name)
