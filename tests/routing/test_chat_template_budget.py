"""A chat template is a program run on a request's messages: its render has a budget (time and
output), and a template that loops or writes without end fails like any broken template, in
bounded time, never holding the request for seconds."""

import pytest

from kvadmin.model_tokenizer.chat_template import ChatTemplateFailed, render_chat

MESSAGES = [{"role": "user", "content": "hi"}]
LOOPS = {
    # Nested loops of the sandbox's longest range: 10^10 steps.
    "ranges": "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
    # Lookups, no output: each step reads the messages.
    "lookups": (
        "{% for i in range(100000) %}{% for j in range(100000) %}"
        "{% set x = messages[0]['content'] %}{% endfor %}{% endfor %}"
    ),
    # Output without end: 10^10 characters.
    "output": "{% for i in range(100000) %}{{ 'x' * 100000 }}{% endfor %}",
}


@pytest.mark.parametrize("template", LOOPS.values(), ids=LOOPS.keys())
def test_a_template_beyond_its_budget_fails(template: str) -> None:
    with pytest.raises(ChatTemplateFailed, match="_OverBudget"):
        render_chat(template, MESSAGES, {})


def test_a_real_template_renders_within_it() -> None:
    template = (
        "{% for message in messages %}<|{{ message['role'] }}|>{{ message['content'] }}"
        "{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}"
        "{{ range(3)|length }}"
    )
    messages = MESSAGES * 2000
    assert render_chat(template, messages, {}).endswith("<|user|>hi<|assistant|>3")
