"""Rendering a model's chat template to text, as transformers' `apply_chat_template` does (and
so vLLM and SGLang, which call it): a sandboxed Jinja environment with trim_blocks and
lstrip_blocks, loop controls, `raise_exception`, `strftime_now` and transformers' `tojson`,
and the variables `messages`, `add_generation_prompt`, `tools`, `documents` and every special
token of tokenizer_config.json (`bos_token`, `eos_token`, ...).

The engines then tokenize the text without adding special tokens: the template writes them.

A template is a program, and a request's messages its input: a render has a budget, at most
RENDER_SECONDS and RENDERED_CHARS of output. The time is checked wherever a template can spend
it: each step of a `range`, each call, attribute or item lookup, and each piece of output.
Beyond either the render fails (ChatTemplateFailed), and the engines tokenize instead.
"""

import contextvars
import json
import time
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from functools import lru_cache
from typing import Any

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment, safe_range

RENDER_SECONDS = 0.5
"""A real template renders a long conversation in milliseconds."""
RENDERED_CHARS = 8 * 1024 * 1024
"""Far beyond the text of SCORE_MAX_TOKENS tokens."""


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


class _OverBudget(Exception):
    pass


_deadline: contextvars.ContextVar[float] = contextvars.ContextVar("chat_template_deadline")


def _spend() -> None:
    if time.monotonic() > _deadline.get(float("inf")):
        raise _OverBudget(f"rendering took more than {RENDER_SECONDS:g}s")


class _Range:
    """The sandbox's `range` (at most its MAX_RANGE items), checking the budget each step."""

    def __init__(self, *args: int) -> None:
        self.numbers = safe_range(*args)

    def __len__(self) -> int:
        return len(self.numbers)

    def __iter__(self) -> Iterator[int]:
        for number in self.numbers:
            _spend()
            yield number


class _Budgeted(ImmutableSandboxedEnvironment):
    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805
        _spend()
        return super().call(__context, __obj, *args, **kwargs)

    def getattr(self, obj: Any, attribute: str) -> Any:
        _spend()
        return super().getattr(obj, attribute)

    def getitem(self, obj: Any, argument: Any) -> Any:
        _spend()
        return super().getitem(obj, argument)


@lru_cache(maxsize=32)
def _compiled(template: str) -> jinja2.Template:
    environment = _Budgeted(
        trim_blocks=True, lstrip_blocks=True, extensions=[_Generation, loopcontrols]
    )
    environment.filters["tojson"] = _tojson
    environment.globals["raise_exception"] = _raise_exception
    environment.globals["strftime_now"] = _strftime_now
    environment.globals["range"] = _Range
    return environment.from_string(template)


def render_chat(
    template: str,
    messages: Sequence[Mapping[str, Any]],
    special_tokens: Mapping[str, Any],
    add_generation_prompt: bool = True,
) -> str:
    """The conversation as the model's prompt text, within the budget (see the module).
    Raises ChatTemplateFailed."""
    budget = _deadline.set(time.monotonic() + RENDER_SECONDS)
    try:
        pieces, size = [], 0
        for piece in _compiled(template).generate(
            **special_tokens,
            messages=[dict(message) for message in messages],
            add_generation_prompt=add_generation_prompt,
            tools=None,
            documents=None,
        ):
            size += len(piece)
            if size > RENDERED_CHARS:
                raise _OverBudget(f"the text is longer than {RENDERED_CHARS} characters")
            _spend()
            pieces.append(piece)
        return "".join(pieces)
    except Exception as error:  # a template is a program: any error is its failure
        raise ChatTemplateFailed(f"{type(error).__name__}: {error}") from None
    finally:
        _deadline.reset(budget)
