"""A realistic shared-prefix workload, reproducible from a seed.

Users come in groups; each group shares one long system prompt (an assistant product, a RAG
template), so its users' requests share a long token prefix. Users hold multi-turn chats whose
prompt grows by the previous reply and a new question each turn. A fraction of requests are cold
one-off completions with no shared prefix at all.
"""

import random
from dataclasses import dataclass, field
from typing import Any

_ONSETS = ("b", "c", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "st", "tr")
_VOWELS = ("a", "e", "i", "o", "u", "ai", "ou")


@dataclass(frozen=True, slots=True)
class WorkloadShape:
    """Knobs of the workload; word counts are (low, high) inclusive ranges (a word is one or
    two tokens). The defaults hold more distinct prefixes than one pod of ~512 GPU blocks keeps,
    so where a request goes decides its hit."""

    groups: int = 12
    users_per_group: int = 8
    system_prompt_words: tuple[int, int] = (200, 800)
    question_words: tuple[int, int] = (10, 80)
    max_turns: int = 8
    continue_probability: float = 0.7
    cold_fraction: float = 0.1
    cold_prompt_words: tuple[int, int] = (40, 400)
    max_tokens: int = 16


@dataclass(slots=True)
class Conversation:
    id: int
    group: int
    messages: list[dict[str, str]]
    turns: int = 0


@dataclass(frozen=True, slots=True)
class SimRequest:
    """One request to send: an OpenAI path and JSON body. `conversation` is None for a cold
    one-off completion."""

    path: str
    body: dict[str, Any]
    conversation: int | None = None
    group: int | None = None

    @property
    def tokenize_body(self) -> dict[str, Any]:
        """The `/tokenize` body a router sends for this request (compatibility.md 2.6, vLLM
        shape)."""
        base = {"model": self.body["model"], "return_token_strs": False}
        if "messages" in self.body:
            return base | {
                "messages": self.body["messages"],
                "add_special_tokens": False,
                "add_generation_prompt": True,
            }
        return base | {"prompt": self.body["prompt"], "add_special_tokens": True}


@dataclass(slots=True)
class Workload:
    """Draws requests one at a time; `record_reply` feeds a chat reply back into its
    conversation so the next turn's prompt extends the last one."""

    model: str
    seed: int = 0
    shape: WorkloadShape = field(default_factory=WorkloadShape)
    _rng: random.Random = field(init=False)
    _words: list[str] = field(init=False)
    _system_prompts: list[str] = field(init=False)
    _active: dict[int, Conversation] = field(init=False, default_factory=dict)
    _next_conversation: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)
        self._words = sorted({self._word() for _ in range(3000)})
        self._system_prompts = [
            f"You are assistant {g} of the simulated fleet. "
            + self._text(self.shape.system_prompt_words)
            for g in range(self.shape.groups)
        ]

    def _word(self) -> str:
        syllables = self._rng.randint(1, 3)
        return "".join(
            self._rng.choice(_ONSETS) + self._rng.choice(_VOWELS) for _ in range(syllables)
        )

    def _text(self, words: tuple[int, int]) -> str:
        count = self._rng.randint(*words)
        picked = self._rng.choices(self._words, k=count)
        sentences = [" ".join(picked[i : i + 12]).capitalize() + "." for i in range(0, count, 12)]
        return " ".join(sentences)

    def next_request(self) -> SimRequest:
        shape = self.shape
        if self._rng.random() < shape.cold_fraction:
            body = {
                "model": self.model,
                "prompt": self._text(shape.cold_prompt_words),
                "max_tokens": shape.max_tokens,
            }
            return SimRequest("/v1/completions", body)
        user = self._rng.randrange(shape.groups * shape.users_per_group)
        conversation = self._active.get(user)
        ongoing = conversation is not None and conversation.turns < shape.max_turns
        if not ongoing or self._rng.random() >= shape.continue_probability:
            group = user // shape.users_per_group
            system = {"role": "system", "content": self._system_prompts[group]}
            conversation = Conversation(self._next_conversation, group, [system])
            self._next_conversation += 1
            self._active[user] = conversation
        assert conversation is not None
        conversation.messages.append({"role": "user", "content": self._text(shape.question_words)})
        conversation.turns += 1
        body = {
            "model": self.model,
            "messages": list(conversation.messages),
            "max_tokens": shape.max_tokens,
        }
        return SimRequest("/v1/chat/completions", body, conversation.id, conversation.group)

    def record_reply(self, request: SimRequest, text: str) -> None:
        if request.conversation is None:
            return
        for conversation in self._active.values():
            if conversation.id == request.conversation:
                conversation.messages.append({"role": "assistant", "content": text})
                return
