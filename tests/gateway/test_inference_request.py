"""What the picker routes by in an OpenAI body."""

import pytest

from kvadmin.gateway.inference_request import (
    InferenceRequest,
    InvalidInference,
    inference_request,
    routed_path,
)


def test_only_the_inference_endpoints_are_routed() -> None:
    assert routed_path("/v1/completions?x=1") == "/v1/completions"
    assert routed_path("/v1/chat/completions") == "/v1/chat/completions"
    assert routed_path("/v1/models") is None


@pytest.mark.parametrize(
    ("path", "body", "request_"),
    [
        ("/v1/completions", b'{"model": "m", "prompt": "hi"}', InferenceRequest("m", prompt="hi")),
        (
            "/v1/completions",
            b'{"model": "m", "prompt": [1, 2]}',
            InferenceRequest("m", token_ids=[1, 2]),
        ),
        (
            "/v1/completions",
            b'{"model": "m", "prompt": ["a", "b"]}',
            InferenceRequest("m", prompt="a"),
        ),
        (
            "/v1/completions",
            b'{"model": "m", "prompt": [[3], [4]]}',
            InferenceRequest("m", token_ids=[3]),
        ),
        (
            "/v1/chat/completions",
            b'{"model": "m", "messages": [{"role": "user", "content": "q"}]}',
            InferenceRequest("m", messages=[{"role": "user", "content": "q"}]),
        ),
    ],
)
def test_it_reads_the_model_and_the_input(path: str, body: bytes, request_) -> None:
    assert inference_request(path, body) == request_


@pytest.mark.parametrize("body", [b"nope", b"[]", b'"text"', b"[" * 100 + b"]" * 100])
def test_a_body_that_is_not_a_json_object_is_invalid(body: bytes) -> None:
    with pytest.raises(InvalidInference):
        inference_request("/v1/completions", body)
