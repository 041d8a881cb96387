"""The built-in tokenizer is deterministic and keeps shared text as shared token prefixes."""

from kvadmin.fleet.tokenizer import (
    BOS,
    IM_END,
    SPECIAL_TOKENS,
    VOCAB_SIZE,
    Message,
    encode,
    encode_chat,
    message_text,
)


def test_the_same_text_always_gives_the_same_ids() -> None:
    text = "The quick brown fox, jumping over 12 lazy dogs!\n"
    assert encode(text) == encode(text)
    assert encode(text) == [
        SPECIAL_TOKENS[BOS],
        *encode(text, add_special_tokens=False),
    ]
    assert all(0 <= t < VOCAB_SIZE for t in encode(text))


def test_ids_are_stable_across_processes() -> None:
    """Pinned values: a changed tokenizer would silently change every simulated cache."""
    assert encode("hello world", add_special_tokens=False) == [
        encode("hello", add_special_tokens=False)[0],
        encode(" world", add_special_tokens=False)[0],
    ]
    assert encode("hello", add_special_tokens=False) == [67125]


def test_special_token_strings_in_text_become_special_ids() -> None:
    assert encode(f"a{IM_END}b", add_special_tokens=False)[1] == SPECIAL_TOKENS[IM_END]


def test_a_shared_system_prompt_gives_a_shared_token_prefix() -> None:
    system = Message("system", "You are a careful assistant. " * 20)
    one = encode_chat([system, Message("user", "What is a KV cache?")])
    two = encode_chat([system, Message("user", "Explain prefix caching.")])
    shared = len(encode_chat([system], add_generation_prompt=False))
    assert one[:shared] == two[:shared]
    assert one[0] == SPECIAL_TOKENS[BOS]


def test_a_conversation_turn_extends_the_previous_prompt() -> None:
    history = [Message("system", "Be brief."), Message("user", "Hi")]
    before = encode_chat(history)
    after = encode_chat([*history, Message("assistant", "hello there"), Message("user", "More")])
    assert after[: len(before)] == before


def test_list_content_keeps_only_its_text_parts() -> None:
    content = [
        {"type": "text", "text": "one"},
        {"type": "image_url", "image_url": {"url": "x"}},
        {"type": "text", "text": "two"},
    ]
    assert message_text(content) == "one\ntwo"
