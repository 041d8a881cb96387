"""Rendering a model's chat template to text, as transformers' `apply_chat_template` does (and
so vLLM and SGLang, which call it): a sandboxed Jinja environment with trim_blocks and
lstrip_blocks, loop controls, `raise_exception`, `strftime_now` and transformers' `tojson`,
and the variables `messages`, `add_generation_prompt`, `tools`, `documents` and every special
token of tokenizer_config.json (`bos_token`, `eos_token`, ...).

The engines then tokenize the text without adding special tokens: the template writes them.
"""

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from functools import lru_cache
from typing import Any

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


class ChatTemplateFailed(Exception):
    """The template does not compile, or raised while rendering these messages."""


class _Generation(Extension):
    """transformers' `{% generation %}...{% endgeneration %}` (it marks the assistant's tokens
    for training masks): rendered as its body."""

    tags = {"generation"}

    def parse(self, parser: Any) -> nodes.Node:
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

    def _body(self, caller: Any) -> str:
        return caller()


def _raise_exception(message: str) -> None:
    raise jinja2.exceptions.TemplateError(message)


def _tojson(
    value: Any,
    ensure_ascii: bool = False,
    indent: int | None = None,
    separators: tuple[str, str] | None = None,
    sort_keys: bool = False,
) -> str:
    """transformers' filter: unlike Jinja's own, no HTML escaping and no ASCII-only output."""
    return json.dumps(
        value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
    )


def _strftime_now(format: str) -> str:
    return datetime.now().strftime(format)


@lru_cache(maxsize=32)
def _compiled(template: str) -> jinja2.Template:
    environment = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[_Generation, loopcontrols]
    )
    environment.filters["tojson"] = _tojson
    environment.globals["raise_exception"] = _raise_exception
    environment.globals["strftime_now"] = _strftime_now
    return environment.from_string(template)


def render_chat(
    template: str,
    messages: Sequence[Mapping[str, Any]],
    special_tokens: Mapping[str, Any],
    add_generation_prompt: bool = True,
) -> str:
    """The conversation as the model's prompt text. Raises ChatTemplateFailed."""
    try:
        return _compiled(template).render(
            **special_tokens,
            messages=[dict(message) for message in messages],
            add_generation_prompt=add_generation_prompt,
            tools=None,
            documents=None,
        )
    except Exception as error:  # a template is a program: any error is its failure
        raise ChatTemplateFailed(f"{type(error).__name__}: {error}") from None
