"""A long prompt is encoded only in its scoring window (`routing.local_tokenize.encode_window`):
its first `keep` ids are exactly those of the whole prompt's encoding, whatever the text (words,
code, CJK, digits, whitespace runs, the text of added tokens as chat templates write them), whether
the first window was enough or it had to grow."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer
from tokenizers.models import WordLevel
from tokenizers.pre_tokenizers import Whitespace

from kvadmin.model_tokenizer.files import cached
from kvadmin.routing.local_tokenize import WINDOW_CHARS_PER_TOKEN, encode_window
from tests.conftest import examples

KEEP = 64
FRAGMENTS = [
    "cache", " prefix", " tokens", "Routing", " don't", "GPU", "(x)", "1234567", "3.14",
    "块", "毕老师", "キャッシュ", "캐시", "кэш", " ", "  ", "    ", "\t", "\n", "\n\n", "\r\n",
    "def f(x):\n    return x", "{\"k\": [1, 2]}", "!!", "...", "—", "é", "🙂",
    "<｜begin▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>", "<｜User", "｜>",
]  # fmt: skip


@pytest.fixture(scope="module")
def tokenizer(deepseek_v4):
    return cached(deepseek_v4).tokenizer


@settings(
    max_examples=examples(150),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    pieces=st.lists(st.sampled_from(FRAGMENTS), min_size=1, max_size=40),
    repeats=st.integers(min_value=1, max_value=60),
    special=st.booleans(),
)
def test_the_windows_ids_are_the_whole_prompts(tokenizer, pieces, repeats, special) -> None:
    text = "".join(pieces) * repeats

    found = encode_window(tokenizer, text, special, KEEP)

    whole = tokenizer.encode(text, add_special_tokens=special).ids
    assert found.tokens == whole[:KEEP]
    if found.estimated:  # read in a window
        assert len(text) > KEEP * WINDOW_CHARS_PER_TOKEN and found.count > KEEP
    else:
        assert found.count == len(whole)


def test_a_text_with_more_characters_per_token_than_the_window_allows_grows_it(
    tokenizer,
) -> None:
    """Long runs of spaces take few tokens: the first window holds fewer than `keep`."""
    text = ("x" + " " * 15) * (KEEP * 2)
    first_window = text[: KEEP * WINDOW_CHARS_PER_TOKEN]
    assert len(tokenizer.encode(first_window).ids) < KEEP

    found = encode_window(tokenizer, text, True, KEEP)

    assert found.tokens == tokenizer.encode(text).ids[:KEEP] and found.estimated


def test_a_window_an_earlier_prompt_had_is_not_encoded_again(tokenizer) -> None:
    """Two questions about one long document: the second reads the first one's window tokens
    (kept by the tokenizer's version: another tokenizer under the same version is not asked)
    and estimates its count from its own length."""
    document = "The cache keeps prefixes of 4096 tokens. " * 200
    first = encode_window(tokenizer, document + "Why?", True, KEEP, version="v1")
    other = Tokenizer(WordLevel({"[UNK]": 0}, "[UNK]"))
    other.pre_tokenizer = Whitespace()

    second = encode_window(other, document * 2 + "How?", True, KEEP, version="v1")

    assert second.tokens == first.tokens == tokenizer.encode(document).ids[:KEEP]
    assert second.estimated and 1.9 < second.count / first.count < 2.1
    assert encode_window(other, document, True, KEEP, version="v2").tokens == [0] * KEEP
