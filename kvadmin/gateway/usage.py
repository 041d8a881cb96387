"""The usage an engine reports at the end of its answer, found as the answer passes: the
picker keeps the first and the last `window` bytes of a response body (bounded memory, and
nothing held back: every chunk goes on at once) and reads `usage` from them at the end.

A plain JSON answer carries one `usage` object (vLLM writes it last, others first); a
streamed one (server-sent events) carries it in its final chunk, when the client asked with
`stream_options.include_usage`, earlier chunks saying `"usage": null` or nothing. Either way
the last non-null `"usage": {...}` in the kept bytes is the answer's. Pure.
"""

import json
import re
from dataclasses import dataclass

_USAGE = re.compile(rb'"usage"\s*:\s*')
_decoder = json.JSONDecoder()


@dataclass(frozen=True, slots=True)
class Usage:
    prompt_tokens: int
    cached_tokens: int


class UsageScanner:
    def __init__(self, window: int) -> None:
        self.window = window
        self.head = bytearray()
        self.tail = bytearray()
        self.size = 0

    def feed(self, chunk: bytes) -> None:
        self.size += len(chunk)
        room = self.window - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            del self.tail[: max(len(self.tail) - self.window, 0)]

    def usage(self) -> Usage | None:
        """The answer's usage, None when the kept bytes hold none that reads as one."""
        found = None
        # The head and the tail overlap nothing; what lies between them is not kept.
        for part in (bytes(self.head), bytes(self.tail)):
            for match in _USAGE.finditer(part):
                try:
                    value, _ = _decoder.raw_decode(part[match.end() :].decode("utf-8", "replace"))
                except ValueError:
                    continue
                if isinstance(value, dict) and (usage := _read(value)) is not None:
                    found = usage
        return found


def _read(usage: dict) -> Usage | None:
    prompt = usage.get("prompt_tokens")
    details = usage.get("prompt_tokens_details") or {}
    cached = (details.get("cached_tokens") or 0) if isinstance(details, dict) else 0
    if type(prompt) is not int or type(cached) is not int:
        return None
    return Usage(prompt, cached)
