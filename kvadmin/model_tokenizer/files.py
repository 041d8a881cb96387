"""A model's Hugging Face tokenizer, from its files: loaded once per process, reloaded when
they change.

A tokenizer is named by a path: a `tokenizer.json`, or the directory holding one. Beside it,
as Hugging Face's `from_pretrained` reads them:

- `tokenizer_config.json` (optional): the special tokens (`bos_token`, `eos_token`, ...) and
  the chat template (`chat_template`: a string, or a list of {"name", "template"} whose
  "default" is used);
- `chat_template.jinja` (optional): a chat template that takes precedence over the config's,
  as in transformers.

`cached(path)` loads again when one's size or modification time moved, as `current_signature`
sees them: statted at most once every RECHECK_SECONDS per path, so an edit is noticed within
about a second and a request costs a dict lookup, not four system calls. A load that failed is
remembered with the files' signature, so a broken file is not parsed again on every request,
only once it changes. A load error names the file, never what it holds (the path may name any
file the process can read).
"""

import json
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer

TOKENIZER_FILE = "tokenizer.json"
CONFIG_FILE = "tokenizer_config.json"
TEMPLATE_FILE = "chat_template.jinja"
MAX_TOKENIZER_BYTES = 128 * 1024 * 1024
MAX_CONFIG_BYTES = 8 * 1024 * 1024
SPECIAL_TOKEN_NAMES = (
    "bos_token",
    "eos_token",
    "unk_token",
    "sep_token",
    "pad_token",
    "cls_token",
    "mask_token",
)

RECHECK_SECONDS = 1.0
Signature = tuple[tuple[int, int] | None, ...]


class TokenizerUnavailable(Exception):
    """The tokenizer's files are missing, too large or not a tokenizer."""


@dataclass(frozen=True, slots=True)
class ModelTokenizer:
    path: str
    tokenizer: Tokenizer
    special_tokens: dict[str, Any]
    """What a chat template sees of tokenizer_config.json: bos_token, eos_token... (text),
    additional_special_tokens (a list of text)."""
    chat_template: str | None
    signature: Signature


def tokenizer_files(path: str | Path) -> tuple[Path, Path, Path]:
    """(tokenizer.json, tokenizer_config.json, chat_template.jinja) for a file or directory."""
    given = Path(path)
    tokenizer_json = given / TOKENIZER_FILE if given.is_dir() else given
    folder = tokenizer_json.parent
    return tokenizer_json, folder / CONFIG_FILE, folder / TEMPLATE_FILE


def signature(files: tuple[Path, ...]) -> Signature:
    """Size and modification time of each file (None: absent)."""
    found: list[tuple[int, int] | None] = []
    for file in files:
        try:
            stat = os.stat(file)
        except OSError:
            found.append(None)
        else:
            found.append((stat.st_size, stat.st_mtime_ns))
    return tuple(found)


_checked: dict[str, tuple[float, Signature]] = {}
"""Each path's signature and the monotonic time it was statted."""


def current_signature(path: str) -> Signature:
    """The signature of `path`'s files, statted again once RECHECK_SECONDS have passed."""
    now = time.monotonic()
    found = _checked.get(path)
    if found is None or now - found[0] >= RECHECK_SECONDS:
        found = _checked[path] = (now, signature(tokenizer_files(path)))
    return found[1]


def load(path: str | Path) -> ModelTokenizer:
    """Raises TokenizerUnavailable."""
    files = tokenizer_files(path)
    before = signature(files)
    tokenizer_json, config_json, template_file = files
    if before[0] is None:
        raise TokenizerUnavailable(f"no {TOKENIZER_FILE} at {path}")
    if before[0][0] > MAX_TOKENIZER_BYTES:
        raise TokenizerUnavailable(f"{tokenizer_json} is larger than {MAX_TOKENIZER_BYTES} bytes")
    try:
        tokenizer = Tokenizer.from_file(str(tokenizer_json))
    except Exception:  # the Rust library raises plain Exception for a bad file
        # Its message may quote the file (an unknown variant's name): never repeat it.
        raise TokenizerUnavailable(f"{tokenizer_json} is not a tokenizer") from None
    config = _json_object(config_json) if before[1] is not None else {}
    template = _text(template_file) if before[2] is not None else None
    return ModelTokenizer(
        path=str(path),
        tokenizer=tokenizer,
        special_tokens=_special_tokens(config),
        chat_template=template if template is not None else _config_template(config),
        signature=before,
    )


class _Cache:
    def __init__(self) -> None:
        self._loaded: dict[str, ModelTokenizer | tuple[Signature, str]] = {}
        self._lock = threading.Lock()

    def get(self, path: str) -> ModelTokenizer:
        current = current_signature(path)
        found = self._loaded.get(path)
        if found is None or _signature_of(found) != current:
            with self._lock:  # one thread loads; the others wait for its result
                found, current = self._loaded.get(path), current_signature(path)
                if found is None or _signature_of(found) != current:
                    try:
                        found = load(path)
                    except TokenizerUnavailable as error:
                        found = (current, str(error))
                    else:  # as the load saw them: a file edited since the check would
                        # otherwise be loaded again on every call until the next check
                        _checked[path] = (time.monotonic(), found.signature)
                    self._loaded[path] = found
        if isinstance(found, tuple):
            raise TokenizerUnavailable(found[1])
        return found

    def clear(self) -> None:
        with self._lock:
            self._loaded.clear()
            _checked.clear()


def _signature_of(found: ModelTokenizer | tuple[Signature, str]) -> Signature:
    return found[0] if isinstance(found, tuple) else found.signature


CACHE = _Cache()


def cached(path: str) -> ModelTokenizer:
    """The tokenizer at `path`, loaded at most once per version of its files in this process.
    Raises TokenizerUnavailable."""
    return CACHE.get(path)


def _text(file: Path) -> str:
    try:
        if file.stat().st_size > MAX_CONFIG_BYTES:
            raise TokenizerUnavailable(f"{file} is larger than {MAX_CONFIG_BYTES} bytes")
        return file.read_text(encoding="utf-8")
    except OSError as error:
        raise TokenizerUnavailable(f"{file}: {error.strerror}") from None
    except UnicodeDecodeError:
        raise TokenizerUnavailable(f"{file} is not UTF-8 text") from None


def _json_object(file: Path) -> dict[str, Any]:
    try:
        value = json.loads(_text(file))
    except (ValueError, RecursionError):
        raise TokenizerUnavailable(f"{file} is not JSON") from None
    if not isinstance(value, dict):
        raise TokenizerUnavailable(f"{file} is not a JSON object")
    return value


def _token_text(value: object) -> str | None:
    """A special token as tokenizer_config.json writes it: text, or an AddedToken object."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else None


def _special_tokens(config: dict[str, Any]) -> dict[str, Any]:
    tokens: dict[str, Any] = {}
    for name in SPECIAL_TOKEN_NAMES:
        text = _token_text(config.get(name))
        if text is not None:
            tokens[name] = text
    extra = config.get("additional_special_tokens")
    if isinstance(extra, list):
        tokens["additional_special_tokens"] = [
            text for text in map(_token_text, extra) if text is not None
        ]
    return tokens


def _config_template(config: dict[str, Any]) -> str | None:
    template = config.get("chat_template")
    if isinstance(template, list):  # named templates: the default one serves chat
        named = {
            entry.get("name"): entry.get("template")
            for entry in template
            if isinstance(entry, dict)
        }
        template = named.get("default")
    return template if isinstance(template, str) else None
