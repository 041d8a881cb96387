"""The usage of a response, found in the bounded head and tail the picker keeps of it."""

import json

from kvadmin.gateway.usage import Usage, UsageScanner


def fed(chunks: list[bytes], window: int = 256) -> UsageScanner:
    scanner = UsageScanner(window)
    for chunk in chunks:
        scanner.feed(chunk)
    return scanner


USAGE = {
    "prompt_tokens": 40,
    "completion_tokens": 3,
    "prompt_tokens_details": {"cached_tokens": 32},
}


def test_it_reads_a_plain_answers_usage_first_or_last() -> None:
    last = json.dumps({"choices": [{"text": "x" * 2000}], "usage": USAGE}).encode()
    first = json.dumps({"usage": USAGE, "choices": [{"text": "x" * 2000}]}).encode()
    for body in (last, first):
        chunks = [body[i : i + 100] for i in range(0, len(body), 100)]
        assert fed(chunks).usage() == Usage(40, 32)


def test_it_reads_the_final_chunk_of_a_stream_not_the_nulls_before() -> None:
    events = [{"choices": [{"text": "w"}], "usage": None} for _ in range(50)]
    events.append({"choices": [], "usage": USAGE})
    stream = [b"data: " + json.dumps(e).encode() + b"\n\n" for e in events] + [b"data: [DONE]\n\n"]
    assert fed(stream).usage() == Usage(40, 32)


def test_memory_stays_bounded_and_a_usage_in_the_middle_is_lost() -> None:
    body = b"x" * 10_000 + json.dumps({"usage": USAGE}).encode() + b"y" * 10_000
    scanner = fed([body[i : i + 333] for i in range(0, len(body), 333)])
    assert len(scanner.head) == len(scanner.tail) == 256
    assert scanner.usage() is None and scanner.size == len(body)


def test_null_details_count_as_no_cached_tokens() -> None:
    body = json.dumps({"usage": {"prompt_tokens": 5, "prompt_tokens_details": None}}).encode()
    assert fed([body]).usage() == Usage(5, 0)
