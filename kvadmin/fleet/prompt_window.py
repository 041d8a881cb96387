"""A near-instant pod's reading of a text prompt (`PodConfig.prompt_window`): a benchmark's
backend that must cost far less than the gateway in front of it (bench/gateway.py's long
prompts), as the reference picker's benchmarks use a near-instant simulator.

A real engine tokenizes, hashes and caches a 220 KB prompt whole (about 0.4 s of this
machine's tokenizer); the gateway's picker reads only its first BLOCK_SIZE * MAX_BLOCKS
tokens. This pod does the same: it tokenizes the prompt's first
`window * WINDOW_CHARS_PER_TOKEN` characters (`routing.local_tokenize`'s first window), serves
and caches the first `window` tokens of them, and reports the prompt's count estimated from
the window's tokens per character (within the outcome's slack for an estimated count). The
tokens of the latest distinct windows are kept, so prompts behind one long document are
tokenized once. Pure but for that memory.
"""

from collections import OrderedDict

from kvadmin.fleet.engine_tokenizer import EngineTokenizer
from kvadmin.routing.local_tokenize import WINDOW_CHARS_PER_TOKEN

REMEMBERED = 64
"""Distinct windows whose tokens are kept (64 windows of 10,240 characters: under 1 MB)."""


class PromptWindow:
    def __init__(self, tokenizer: EngineTokenizer, window: int) -> None:
        self.tokenizer = tokenizer
        self.window = window
        self._known: OrderedDict[tuple[str, bool], list[int]] = OrderedDict()

    def tokens(self, text: str, add_special_tokens: bool) -> tuple[list[int], int]:
        """The prompt's first `window` tokens, and its token count (estimated when the
        prompt is longer than the window's characters)."""
        head = text[: self.window * WINDOW_CHARS_PER_TOKEN]
        key = (head, add_special_tokens)
        ids = self._known.get(key)
        if ids is None:
            ids = self._known[key] = self.tokenizer.encode(head, add_special_tokens)
            while len(self._known) > REMEMBERED:
                self._known.popitem(last=False)
        else:
            self._known.move_to_end(key)
        served = ids[: self.window]
        if len(head) == len(text):
            return served, len(ids)
        return served, max(round(len(ids) * len(text) / len(head)), len(served) + 1)
