"""`"stream": true` answers server-sent events as vLLM does: a word per chunk, the usage in a
last chunk with no choices when `stream_options.include_usage` asks, then `[DONE]`."""

import json
import urllib.request

from tests.fleet.conftest import StartFleet, local_config
from tests.waiting import patient


def stream(url: str, body: dict) -> list[bytes]:
    request = urllib.request.Request(url, json.dumps(body).encode())
    with urllib.request.urlopen(request, timeout=patient(10)) as response:
        assert response.headers["Content-Type"] == "text/event-stream"
        return [line for line in response.read().split(b"\n\n") if line]


def test_a_streamed_chat_ends_with_its_usage_and_done(start_fleet: StartFleet) -> None:
    pod = start_fleet(local_config()).pods[0]
    url = f"{pod.config.http_url}/v1/chat/completions"
    body = {
        "messages": [{"role": "user", "content": "The same question. " * 20}],
        "max_tokens": 3,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    stream(url, body)
    events = stream(url, body)
    assert events[-1] == b"data: [DONE]"
    chunks = [json.loads(event.removeprefix(b"data: ")) for event in events[:-1]]
    words = chunks[:-1]
    assert len(words) == 3 and all(c["object"] == "chat.completion.chunk" for c in words)
    assert words[0]["choices"][0]["delta"]["role"] == "assistant"
    assert [c["choices"][0]["finish_reason"] for c in words] == [None, None, "length"]
    usage = chunks[-1]["usage"]
    assert chunks[-1]["choices"] == [] and usage["completion_tokens"] == 3
    assert usage["prompt_tokens_details"]["cached_tokens"] > 0  # the second time


def test_without_include_usage_a_stream_carries_none(start_fleet: StartFleet) -> None:
    pod = start_fleet(local_config()).pods[0]
    url = f"{pod.config.http_url}/v1/completions"
    events = stream(url, {"prompt": "hello there", "max_tokens": 2, "stream": True})
    chunks = [json.loads(event.removeprefix(b"data: ")) for event in events[:-1]]
    assert len(chunks) == 2 and all("usage" not in c for c in chunks)
    assert "".join(c["choices"][0]["text"] for c in chunks).count(" ") == 1
