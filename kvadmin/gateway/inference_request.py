"""What the picker reads of an OpenAI request body: the model and exactly one input, as the
routing service takes them (`prompt`, `messages` or `token_ids`). Pure.

`POST /v1/completions` gives `prompt`: text, a list of token ids, or a batch (a list of
texts or of token id lists), routed by its first prompt (one batch goes to one pod);
`POST /v1/chat/completions` gives `messages`. The routing service validates the values
themselves (kvadmin/routing/service.py), with the same messages as the score API.
"""

from dataclasses import dataclass

from kvadmin.untrusted_json import InvalidJson, decode_json

COMPLETIONS = "/v1/completions"
CHAT_COMPLETIONS = "/v1/chat/completions"
ROUTED_PATHS = (COMPLETIONS, CHAT_COMPLETIONS)


class InvalidInference(ValueError):
    """A body the picker cannot route: 400 to the client."""


@dataclass(frozen=True, slots=True)
class InferenceRequest:
    model: object
    prompt: object = None
    messages: object = None
    token_ids: object = None


def routed_path(path: str) -> str | None:
    """The inference endpoint `path` names (its query left out), None for any other."""
    bare = path.partition("?")[0]
    return bare if bare in ROUTED_PATHS else None


def inference_request(path: str, body: bytes) -> InferenceRequest:
    try:
        decoded = decode_json(body)
    except InvalidJson as error:
        raise InvalidInference(f"the body is not valid JSON: {error}") from None
    if not isinstance(decoded, dict):
        raise InvalidInference("the body must be a JSON object")
    model = decoded.get("model")
    if path == CHAT_COMPLETIONS:
        return InferenceRequest(model, messages=decoded.get("messages"))
    prompt = decoded.get("prompt")
    if isinstance(prompt, list) and prompt and isinstance(prompt[0], list | str):
        prompt = prompt[0]  # a batch: routed by its first prompt
    if isinstance(prompt, list):
        return InferenceRequest(model, token_ids=prompt)
    return InferenceRequest(model, prompt=prompt)
