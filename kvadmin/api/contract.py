"""The body of POST /api/v1/score: msgspec decodes it into `routing.request.ScoreRequest`, the
request declared once (types and limits checked in C, token ids straight into ints), and
kvadmin/api/openapi.py generates its schema from the same struct. `routing.request.checked`
checks what a schema cannot say.

A body the struct refuses is decoded again the careful way (`untrusted_json.decode_json`),
so deep nesting and bad UTF-8 are named as such; otherwise msgspec's own message is answered
with the field at fault.
"""

import msgspec

from kvadmin.routing.request import ScoreRequest, named
from kvadmin.untrusted_json import InvalidJson, decode_json


class InvalidBody(ValueError):
    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field


_decoder = msgspec.json.Decoder(ScoreRequest)


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
    invalid = named(refused or "not a score request")
    raise InvalidBody(invalid.message, invalid.field)
