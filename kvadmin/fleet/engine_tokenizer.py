"""What a simulated engine tokenizes with: the model's real Hugging Face tokenizer when the pod
is configured with one (`PodConfig.tokenizer`), else the built-in toy tokenizer.

The real one works as vLLM and SGLang do: a prompt is encoded with `add_special_tokens` as
asked; chat messages are rendered with the model's chat template (transformers' rendering)
and the text encoded with `add_special_tokens` as asked (clients send False: the template
writes the special tokens).
"""

from collections.abc import Sequence
from typing import Protocol

from kvadmin.fleet import tokenizer as toy
from kvadmin.fleet.tokenizer import Message
from kvadmin.model_tokenizer.chat_template import ChatTemplateFailed, render_chat
from kvadmin.model_tokenizer.files import cached


class ChatNotSupported(Exception):
    """The model has no chat template, or it failed on these messages (an engine's 400)."""


class EngineTokenizer(Protocol):
    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]: ...

    def encode_chat(
        self,
        messages: Sequence[Message],
        add_generation_prompt: bool = True,
        add_special_tokens: bool = False,
    ) -> list[int]: ...


class ToyTokenizer:
    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        return toy.encode(text, add_special_tokens)

    def encode_chat(
        self,
        messages: Sequence[Message],
        add_generation_prompt: bool = True,
        add_special_tokens: bool = False,
    ) -> list[int]:
        return toy.encode_chat(messages, add_generation_prompt, add_special_tokens)


class HuggingFaceTokenizer:
    """The tokenizer files at `path` (reloaded when they change, as kvadmin's own)."""

    def __init__(self, path: str) -> None:
        self.path = path
        cached(path)  # a pod that cannot load its tokenizer fails at start, not per request

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        return cached(self.path).tokenizer.encode(text, add_special_tokens=add_special_tokens).ids

    def encode_chat(
        self,
        messages: Sequence[Message],
        add_generation_prompt: bool = True,
        add_special_tokens: bool = False,
    ) -> list[int]:
        model_tokenizer = cached(self.path)
        if model_tokenizer.chat_template is None:
            raise ChatNotSupported(f"{self.path} has no chat template")
        conversation = [{"role": m.role, "content": m.content} for m in messages]
        try:
            text = render_chat(
                model_tokenizer.chat_template,
                conversation,
                model_tokenizer.special_tokens,
                add_generation_prompt,
            )
        except ChatTemplateFailed as error:
            raise ChatNotSupported(str(error)) from None
        return model_tokenizer.tokenizer.encode(text, add_special_tokens=add_special_tokens).ids


def engine_tokenizer(path: str) -> EngineTokenizer:
    """The real tokenizer at `path`, or the toy one for an empty path. Raises
    `model_tokenizer.files.TokenizerUnavailable`."""
    return HuggingFaceTokenizer(path) if path else ToyTokenizer()
