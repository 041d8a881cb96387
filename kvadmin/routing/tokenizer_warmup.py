"""The configured local tokenizers, loaded once when a web process starts (`warm_up`), so that
the process's first tokenized request does not pay for the load (about 1 s for DeepSeek V4's
tokenizer, and a first encode's warm-up beside it).

Bounded: at most WARMUP_SECONDS in all, then the process serves and whatever is still loading
goes on in the background (a request that needs it waits for that load, as it would have
anyway). A tokenizer that fails to load is logged and skipped: the process starts all the
same, and its requests fall back to the engines as before (`routing.tokenize`).
"""

import asyncio
import contextlib
import logging
import time

from django.db import close_old_connections

from kvadmin.engines.models import Engine
from kvadmin.routing.local_tokenize import LocalTokenizerFailed, tokenize_locally

log = logging.getLogger(__name__)

WARMUP_SECONDS = 10.0
_SAMPLE = "kvadmin warms up its tokenizer"


def configured_paths() -> list[str]:
    """Every tokenizer path an engine names, once."""
    try:
        return sorted(set(Engine.objects.exclude(tokenizer="").values_list("tokenizer", flat=True)))
    finally:
        close_old_connections()


def load(paths: list[str], deadline: float) -> list[str]:
    """Load and warm each tokenizer (an encode, and its chat template compiled) until
    `deadline` (monotonic); the paths loaded."""
    loaded = []
    for n, path in enumerate(paths):
        if time.monotonic() >= deadline:
            log.warning("tokenizers not loaded at start (out of time): %s", ", ".join(paths[n:]))
            break
        try:
            tokenize_locally(path, prompt=_SAMPLE, keep=16)
        except LocalTokenizerFailed as error:
            log.warning("tokenizer %s not loaded at start: %s", path, error)
            continue
        with contextlib.suppress(LocalTokenizerFailed):  # no template, or one that fails
            tokenize_locally(path, messages=[{"role": "user", "content": _SAMPLE}], keep=16)
        loaded.append(path)
    return loaded


async def warm_up(seconds: float = WARMUP_SECONDS) -> None:
    """Load the configured tokenizers in a thread, waiting at most `seconds`. Never raises:
    a database or tokenizer that fails is logged, and the process starts."""
    deadline = time.monotonic() + seconds

    def run() -> list[str]:
        return load(configured_paths(), deadline)

    work = asyncio.ensure_future(asyncio.to_thread(run))
    try:
        loaded = await asyncio.wait_for(asyncio.shield(work), seconds)
    except TimeoutError:
        log.warning("tokenizers still loading after %.0f s: serving meanwhile", seconds)
        return
    except Exception:
        log.exception("tokenizers not loaded at start")
        return
    if loaded:
        log.info("tokenizers loaded at start: %s", ", ".join(loaded))
