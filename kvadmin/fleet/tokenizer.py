"""A deterministic built-in tokenizer: a stand-in for a model tokenizer in simulated pods.

It is not a real model's tokenizer, and nothing outside the simulated fleet should rely on its
ids. It has the properties prefix caching depends on: the same text always yields the same ids,
a shared leading text yields a shared leading run of ids, and a chat template renders shared
system prompts into shared token prefixes.

1. Special token strings (`<|begin_of_text|>`, `<|im_start|>`, ...) found in the text become their
   fixed ids, as Hugging Face tokenizers do.
2. The rest is split into pieces as GPT-style pre-tokenizers do: a word or one punctuation mark
   with at most one leading space, whitespace up to and including a newline, or other whitespace
   (leaving the last space to the next word). A newline is never merged into the next word, so a
   prompt ending in a newline stays a token prefix of its continuation. Pieces longer than
   `_MAX_PIECE` characters are split into chunks, a crude stand-in for subwords.
3. Each piece maps to a stable id: BLAKE2b of its UTF-8 bytes modulo the regular vocabulary.
"""

import re
from collections.abc import Sequence
from dataclasses import dataclass
from hashlib import blake2b

VOCAB_SIZE = 150_000
BOS = "<|begin_of_text|>"
EOS = "<|end_of_text|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
SPECIAL_TOKENS: dict[str, int] = {
    BOS: VOCAB_SIZE - 4,
    EOS: VOCAB_SIZE - 3,
    IM_START: VOCAB_SIZE - 2,
    IM_END: VOCAB_SIZE - 1,
}
REGULAR_VOCAB = VOCAB_SIZE - len(SPECIAL_TOKENS)

_MAX_PIECE = 8
_SPECIAL_SPLIT = re.compile("(" + "|".join(re.escape(s) for s in SPECIAL_TOKENS) + ")")
_PIECES = re.compile(r" ?\w+| ?[^\w\s]|\s*\n|\s+(?!\S)|\s+")


@dataclass(frozen=True, slots=True)
class Message:
    role: str
    content: str


def message_text(content: object) -> str:
    """A message's content as text: a string as is; OpenAI list content keeps only its text
    parts, joined with newlines (compatibility.md 2.6)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            part.get("text", "")
            for part in content
            if isinstance(part, dict) and part.get("type", "text") == "text"
        ]
        return "\n".join(str(part) for part in parts)
    return "" if content is None else str(content)


def _piece_id(piece: str) -> int:
    digest = blake2b(piece.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % REGULAR_VOCAB


def _encode_plain(text: str) -> list[int]:
    ids: list[int] = []
    for match in _PIECES.finditer(text):
        piece = match.group()
        ids.extend(_piece_id(piece[i : i + _MAX_PIECE]) for i in range(0, len(piece), _MAX_PIECE))
    return ids


def encode(text: str, add_special_tokens: bool = True) -> list[int]:
    """Token ids of `text`; `add_special_tokens` prepends the BOS token."""
    ids = [SPECIAL_TOKENS[BOS]] if add_special_tokens else []
    for part in _SPECIAL_SPLIT.split(text):
        if part in SPECIAL_TOKENS:
            ids.append(SPECIAL_TOKENS[part])
        elif part:
            ids.extend(_encode_plain(part))
    return ids


def render_chat(messages: Sequence[Message], add_generation_prompt: bool = True) -> str:
    """The chat template (ChatML with a leading BOS), rendered to text as engines do before
    tokenizing it with `add_special_tokens=False`."""
    turns = "".join(f"{IM_START}{m.role}\n{m.content}{IM_END}\n" for m in messages)
    return BOS + turns + (f"{IM_START}assistant\n" if add_generation_prompt else "")


def encode_chat(
    messages: Sequence[Message],
    add_generation_prompt: bool = True,
    add_special_tokens: bool = False,
) -> list[int]:
    """Token ids of a conversation. Like vLLM, `add_special_tokens=True` on top of a template that
    already starts with BOS yields a doubled BOS: clients send False for chat."""
    return encode(render_chat(messages, add_generation_prompt), add_special_tokens)
