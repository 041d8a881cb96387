"""Token ids for text and chat requests: from the model's local tokenizer when its engines name one
(`routing.local_tokenize`), else from the engines' own `POST /tokenize` (compatibility.md 2.6).

kthena has no local tokenizer: it asks an engine, whose request it is about to queue there.
kvadmin tokenizes in-process when the model's tokenizer files are configured, and falls back
to the engines when they do not load, when the chat template cannot render the messages, or
when the consistency guard (`routing.tokenizer_guard`) disabled them; 1 in N locally
tokenized requests is checked against an engine off the request path. Unlike kthena, a
failing engine is not the end: the next candidate is tried, and only when every candidate
failed does tokenization fail.

Each engine call is bounded as the load scraper's are (`kvadmin.load.fetch.EngineFetch`): one
deadline for the whole exchange (TOKENIZE_TIMEOUT), and an answer of at most
`answer_limit()` bytes (the ids of SCORE_MAX_TOKENS tokens). Any failure, a hang-up or a
truncated answer too, moves on to the next engine. And one model's slow engines hold at most
TOKENIZE_WAITING_PER_MODEL requests of its own: the next ones fail at once (503) instead of
taking the threads other models' requests score in.

Token ids are cached per prompt in a bounded LRU, so a repeated prompt costs no HTTP call. The
cache keys on a digest of (model, input), never the text itself, and keeps only the tokens
scoring can use (the first block_size * max_blocks), so its memory stays bounded however long
the prompts are. The digest hashes the whole input, so a request computes it once (`text_of`)
and looks it up and fills it with the same `Text`.
"""

import dataclasses
import itertools
import json
import logging
import threading
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kvadmin.conf import knob
from kvadmin.load.fetch import EngineFetch, FetchFailed
from kvadmin.routing import tokenizer_guard
from kvadmin.routing.local_tokenize import (
    LocalTokenizerFailed,
    LocalTokens,
    Messages,
    files_version,
    tokenize_locally,
)
from kvadmin.routing.token_cache import TokenCache, digest

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Tokenizer:
    """A candidate engine that can tokenize: its pod id, engine kind and HTTP base URL."""

    pod: str
    kind: str
    base_url: str


@dataclass(frozen=True, slots=True)
class Tokenized:
    tokens: array
    """The first `keep` token ids (array of unsigned 32-bit ints)."""
    count: int
    """How many tokens the whole prompt has."""
    source: str
    """"local", "engine:<pod>" or "cache" (the decision's `tokenizer`)."""
    estimated: bool = False
    """`count` is estimated (the local tokenizer read only the scoring window)."""
    fallback: str = ""
    """Why the configured local tokenizer did not tokenize (LocalTokenizerFailed.reason, or
    "disabled")."""


class TokenizationFailed(Exception):
    """Every candidate engine failed to tokenize; `failures` holds (pod, reason) per try."""

    def __init__(self, failures: Sequence[tuple[str, str]]) -> None:
        self.failures = list(failures)
        tried = "; ".join(f"{pod}: {reason}" for pod, reason in self.failures)
        super().__init__(f"tokenization failed on every candidate ({tried or 'none can'})")


def request_body(
    kind: str, model: str, prompt: str | None = None, messages: Messages | None = None
) -> dict[str, Any]:
    """The /tokenize body kthena sends to a vLLM or SGLang engine (compatibility.md 2.6)."""
    if messages is not None:
        body: dict[str, Any] = {"model": model, "messages": messages, "add_special_tokens": False}
        if kind != "sglang":
            body |= {"add_generation_prompt": True, "return_token_strs": False}
        return body
    body = {"model": model, "prompt": prompt, "add_special_tokens": True}
    if kind != "sglang":
        body["return_token_strs"] = False
    return body


CACHE: TokenCache[Tokenized] = TokenCache()
"""(model, input) digest -> Tokenized."""
_rotation = itertools.count()


@dataclass(frozen=True, slots=True)
class Text:
    """A request's text input, with the tokenizer that is tried first and its cache key."""

    model: str
    prompt: str | None
    messages: Messages | None
    keep: int
    """How many leading ids are kept (BLOCK_SIZE * MAX_BLOCKS)."""
    local: str | None
    """The model's local tokenizer path; None when it has none or the guard disabled it."""
    fallback: str
    """"disabled" when the guard disabled the local tokenizer."""
    key: bytes


def text_of(
    model: str,
    *,
    prompt: str | None = None,
    messages: Messages | None = None,
    keep: int,
    local: str | None = None,
) -> Text:
    """A text `prompt` or chat `messages` (contents already plain strings) to tokenize, `local`
    naming the model's tokenizer."""
    fallback = "disabled" if local and tokenizer_guard.disabled(model) else ""
    if fallback:
        local = None
    # Local ids are cached apart from the engines' and per version of the tokenizer's files,
    # so neither a disabled tokenizer's ids nor an edited one's outlive it.
    key = _cache_key(model, prompt, messages, keep, files_version(local) if local else "")
    return Text(model, prompt, messages, keep, local, fallback, key)


def tokenize(
    text: Text,
    tokenizers: Sequence[Tokenizer],
    *,
    timeout: float,
    cache_size: int,
    cached_only: bool = False,
) -> Tokenized | None:
    """Token ids of `text`: cached, else from its local tokenizer, tried first, then the
    engine tokenizers one after another, starting at a different one each call so the load
    spreads; raises TokenizationFailed when all failed (or there are none). `cached_only`:
    the cached ids or None, nothing tokenized (a caller on an event loop tokenizes in a
    thread only on a miss, with the same `text`)."""
    cached = CACHE.get(text.key)
    if cached is not None:
        return Tokenized(cached.tokens, cached.count, "cache", cached.estimated)
    if cached_only:
        return None
    fallback = text.fallback
    if text.local:
        try:
            found = tokenize_locally(
                text.local, prompt=text.prompt, messages=text.messages, keep=text.keep
            )
        except LocalTokenizerFailed as failure:
            log.info("%s tokenized by an engine: %s", text.model, failure)
            fallback = failure.reason
        else:
            result = Tokenized(array("I", found.tokens), found.count, "local", found.estimated)
            CACHE.put(text.key, result, cache_size)
            if tokenizer_guard.sampled():
                checked = check_input(text, found)
                tokenizer_guard.submit(
                    tokenizer_guard.Check(
                        text.model,
                        found.tokens,
                        found.count,
                        found.estimated,
                        lambda left_out: _engine_tokens(
                            checked, [t for t in tokenizers if t.pod not in left_out], timeout
                        ),
                        tuple(t.pod for t in tokenizers),
                    )
                )
            return result
    pod, tokens = _engine_tokens(text, tokenizers, timeout)
    result = Tokenized(
        array("I", tokens[: text.keep]), len(tokens), f"engine:{pod}", fallback=fallback
    )
    CACHE.put(text.key, result, cache_size)
    return result


CHECK_READ_FACTOR = 2
"""How far past the local window the guard's engine reads a long text prompt, in windows."""


def check_input(text: Text, found: LocalTokens) -> Text:
    """What the consistency guard asks an engine to tokenize for the local tokens `found`:
    `text` itself, but of a text prompt whose count was estimated from a window, only its
    first CHECK_READ_FACTOR times the characters the window read. The guard compares the
    first `keep` ids alone in that case (no exact count to compare), and they lie within the
    window; the engine sees no cut where the local tokenizer cut, so the window's rule (step
    2 of `routing.local_tokenize`) is still checked, and a 220 KB prompt costs the engine
    the tokenizing of 20 KB, not of 220 KB (about 0.4 s of a CPU core each: sampling 1 in
    100 of 100 requests/s took 0.4 of a core of the engines')."""
    if not found.estimated or text.prompt is None:
        return text
    return dataclasses.replace(text, prompt=text.prompt[: CHECK_READ_FACTOR * found.read])


def _engine_tokens(
    text: Text, tokenizers: Sequence[Tokenizer], timeout: float
) -> tuple[str, list[int]]:
    """(pod, token ids) from the first candidate engine that answers, unless the model has
    TOKENIZE_WAITING_PER_MODEL requests waiting on its engines already."""
    gate = _gate(text.model)
    if not gate.acquire(blocking=False):
        waiting = knob("TOKENIZE_WAITING_PER_MODEL")
        raise TokenizationFailed([("*", f"{waiting} requests already wait on the engines")])
    try:
        failures: list[tuple[str, str]] = []
        start = next(_rotation) % len(tokenizers) if tokenizers else 0
        for tokenizer in (*tokenizers[start:], *tokenizers[:start]):
            body = request_body(tokenizer.kind, text.model, text.prompt, text.messages)
            try:
                return tokenizer.pod, _call(tokenizer, body, timeout)
            except _Failed as failure:
                failures.append((tokenizer.pod, str(failure)))
        raise TokenizationFailed(failures)
    finally:
        gate.release()


_gates: dict[tuple[str, int], threading.BoundedSemaphore] = {}
_gates_lock = threading.Lock()


def _gate(model: str) -> threading.BoundedSemaphore:
    """The model's engine calls in flight (a new gate when the knob changes)."""
    size = max(1, knob("TOKENIZE_WAITING_PER_MODEL"))
    with _gates_lock:
        gate = _gates.get((model, size))
        if gate is None:
            gate = _gates[(model, size)] = threading.BoundedSemaphore(size)
        return gate


def answer_limit() -> int:
    """The largest /tokenize answer read: SCORE_MAX_TOKENS ids of up to 10 digits and a
    separator each, and room for the rest of the JSON."""
    return 65_536 + 12 * knob("SCORE_MAX_TOKENS")


class _Failed(Exception):
    pass


def _call(tokenizer: Tokenizer, body: dict[str, Any], timeout: float) -> list[int]:
    fetch = EngineFetch(
        tokenizer.base_url,
        timeout,
        answer_limit(),
        path="/tokenize",
        body=json.dumps(body).encode(),
        accept="application/json",
    )
    try:
        answer = json.loads(fetch.run())
    except FetchFailed as error:
        raise _Failed(str(error)) from None
    except (ValueError, RecursionError) as error:  # not JSON, or nested beyond the parser
        raise _Failed(f"the answer is not JSON ({type(error).__name__})") from None
    tokens = answer.get("tokens") if isinstance(answer, dict) else None
    if not isinstance(tokens, list) or not all(
        type(token) is int and 0 <= token < 2**32 for token in tokens
    ):
        raise _Failed("the answer has no list of token ids")
    return tokens


def _cache_key(
    model: str, prompt: str | None, messages: Messages | None, keep: int, tokenizer: str
) -> bytes:
    source = ["messages", messages] if messages is not None else ["prompt", prompt]
    return digest(model, keep, tokenizer, *source)
