"""Token ids from the model's own tokenizer files, in this process (Engine.tokenizer).

The same ids as the engines' /tokenize (compatibility.md 2.6): a text prompt is encoded with its
special tokens added as the tokenizer's post-processor defines them (`add_special_tokens=True`);
chat messages are rendered with the model's chat template and encoded without adding any, since the
template writes them.

Scoring reads only the first `keep` tokens (BLOCK_SIZE * MAX_BLOCKS), so a long prompt is not
encoded whole, which would cost as much as the engine's own tokenization:

1. A prompt of at most `keep * WINDOW_CHARS_PER_TOKEN` characters is encoded whole: exact ids
   and count.
2. Otherwise its first that many characters (the window) are encoded, and the tokens of the
   window's last two pre-tokenized pieces dropped: the cut may have split a word, and a
   pre-tokenizer's split of a piece depends on at most the next character. The cut never
   splits the text of an added token (`<｜User｜>`, which chat templates write): it moves to
   that text's start, else the split text would be pre-tokenized into several pieces, more
   than are dropped. What remains is
   exactly the full prompt's leading tokens, as long as every piece is tokenized on its own,
   as in every BPE tokenizer with a regex pre-tokenizer (the consistency guard,
   `routing.tokenizer_guard`, checks it against the engines all along).
3. If fewer than `keep` tokens remain, the window doubles and step 2 runs again, up to the
   whole prompt.
4. The count of a prompt not encoded whole is estimated from the window's tokens per
   character, and said to be (`LocalTokens.estimated`).

The tokens of the latest WINDOWS_KEPT windows are kept (by a digest of the tokenizer's version
and the window's text): requests behind one long document (a RAG context, a long system prompt,
a chat's history) encode it once.
"""

import functools
from array import array
from dataclasses import dataclass

from tokenizers import Tokenizer

from kvadmin.model_tokenizer.chat_template import ChatTemplateFailed, render_chat
from kvadmin.model_tokenizer.files import TokenizerUnavailable, cached, current_signature
from kvadmin.routing.token_cache import TokenCache, digest

Messages = list[dict[str, str]]

WINDOW_CHARS_PER_TOKEN = 5
"""The first window holds this many characters per kept token. With DeepSeek V4's tokenizer,
English prose has 4.7 characters per token, Python code 4.2 to 4.7, Markdown 3.5 to 4, JSON
3.2, Russian 2.7, CJK under 2: one window is almost always enough, and a window is all the
tokenizer reads (its pre-tokenizer costs more than linearly in the text it is given)."""
_UNSAFE_PIECES = 2
WINDOWS_KEPT = 64


@dataclass(frozen=True, slots=True)
class LocalTokens:
    tokens: list[int]
    """The first `keep` token ids."""
    count: int
    estimated: bool
    """`count` is estimated from the window (step 4)."""
    read: int
    """How many leading characters of the text were encoded: all of them when `count` is
    exact, else the window's."""


@dataclass(frozen=True, slots=True)
class _Window:
    """What a window's encoding gives (step 2)."""

    ids: array
    """Its first `keep` ids."""
    safe: int
    """How many of its tokens lie before the dropped pieces."""
    covered: int
    """How many characters those cover."""


WINDOWS: TokenCache[_Window] = TokenCache()


class LocalTokenizerFailed(Exception):
    """The local tokenizer cannot tokenize this request; `reason` is "template" (the chat
    template failed) or "unavailable" (its files did not load)."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason


def tokenize_locally(
    path: str, *, prompt: str | None = None, messages: Messages | None = None, keep: int
) -> LocalTokens:
    """Raises LocalTokenizerFailed."""
    try:
        model_tokenizer = cached(path)
    except TokenizerUnavailable as error:
        raise LocalTokenizerFailed("unavailable", str(error)) from None
    version = f"{path}|{model_tokenizer.signature}"
    if messages is None:
        assert prompt is not None
        return encode_window(model_tokenizer.tokenizer, prompt, True, keep, version)
    if model_tokenizer.chat_template is None:
        raise LocalTokenizerFailed("template", f"{path} has no chat template")
    try:
        text = render_chat(model_tokenizer.chat_template, messages, model_tokenizer.special_tokens)
    except ChatTemplateFailed as error:
        raise LocalTokenizerFailed("template", str(error)) from None
    return encode_window(model_tokenizer.tokenizer, text, False, keep, version)


def files_version(path: str) -> str:
    """The path and the size and modification time of its files: changes when they do (seen
    within `files.RECHECK_SECONDS`)."""
    return f"{path}|{current_signature(path)}"


def encode_window(
    tokenizer: Tokenizer, text: str, add_special_tokens: bool, keep: int, version: str = ""
) -> LocalTokens:
    """The first `keep` ids of `text` and its token count, encoding as little as it can.
    `version`: the tokenizer's path and files' signature, under which windows are kept (none
    without)."""
    window = max(keep, 1) * WINDOW_CHARS_PER_TOKEN
    while window < len(text):
        head = text[: _cut(tokenizer, text, window)]
        found = _window(tokenizer, head, add_special_tokens, keep, version)
        if found.safe >= keep:
            estimate = max(round(found.safe * len(text) / found.covered), found.safe + 1)
            return LocalTokens(found.ids.tolist(), estimate, True, len(head))
        window *= 2
    ids = tokenizer.encode(text, add_special_tokens=add_special_tokens).ids
    return LocalTokens(ids[:keep], len(ids), False, len(text))


def _window(
    tokenizer: Tokenizer, head: str, add_special_tokens: bool, keep: int, version: str
) -> _Window:
    key = b""
    if version:
        key = digest(version, keep, add_special_tokens, head)
        if found := WINDOWS.get(key):
            return found
    encoding = tokenizer.encode(head, add_special_tokens=add_special_tokens)
    safe = _safe_length(encoding.word_ids)
    covered = max(encoding.offsets[safe - 1][1], 1) if safe else 1
    found = _Window(array("I", encoding.ids[:keep]), safe, covered)
    if key:
        WINDOWS.put(key, found, WINDOWS_KEPT)
    return found


def _cut(tokenizer: Tokenizer, text: str, window: int) -> int:
    """`window`, or earlier: the start of the added token's text it would split."""
    longest, by_first = _added_texts(tokenizer)
    cut = window
    position = cut - 1
    while position > max(cut - longest, -1):
        for added in by_first.get(text[position], ()):
            if position + len(added) > cut and text.startswith(added, position):
                cut = position  # and look again before it: the text of another may span it
                break
        position -= 1
    return cut


@functools.lru_cache(maxsize=16)
def _added_texts(tokenizer: Tokenizer) -> tuple[int, dict[str, tuple[str, ...]]]:
    """The longest of the tokenizer's added tokens' texts, and the texts by first character."""
    texts = {token.content for token in tokenizer.get_added_tokens_decoder().values()}
    by_first: dict[str, list[str]] = {}
    for added in filter(None, texts):
        by_first.setdefault(added[0], []).append(added)
    return max(map(len, texts), default=0), {
        first: tuple(found) for first, found in by_first.items()
    }


def _safe_length(word_ids: list[int | None]) -> int:
    """How many leading tokens lie before the last `_UNSAFE_PIECES` pieces of the window
    (special tokens a post-processor appends have no piece: they are after it too)."""
    pieces = [word for word in word_ids if word is not None]
    if not pieces:
        return 0
    first_unsafe = max(pieces) - _UNSAFE_PIECES + 1
    for position, word in enumerate(word_ids):
        if word is not None and word >= first_unsafe:
            return position
    return len(word_ids)
