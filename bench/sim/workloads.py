"""Request traces for the routing simulation, reproducible from a seed.

A request is its prompt's blocks as the engines chain them: block i's id covers every token up to
the end of block i, so two prompts share block ids exactly as long as they share tokens. The
router's index is keyed by the same ids (kthena hashes each block alone, which differs only when
the same 16 tokens recur after different prefixes; none of these workloads does that on purpose).

- `demo`: the demo's traffic (`kvadmin.fleet.workload`): 12 groups of 8 users behind long system
  prompts, multi-turn chats, 10% cold one-off completions; tokenized by the simulated fleet's
  tokenizer and chat template.
- `zipf`: 240 prefix groups (1-2k token system prompts) drawn with Zipf popularity (s = 1.1),
  each request a fresh question on its group's prefix: far more prefix than the fleet's GPUs
  hold, so much of it lives in host memory or on disk.
- `llm-d`: like llm-d's shared-prefix benchmark: 150 groups sharing a 1k-token prefix, 5 users
  each, multi-turn conversations (each turn adds the reply and a new question).
- `llm-d+preamble`: the same trace with the same 32 tokens (a chat template's preamble) before
  every prompt, so every request shares its first two blocks with every other.
"""

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kvadmin.fleet.tokenizer import Message, encode_chat
from kvadmin.fleet.workload import Workload
from scoring.hashing import DEFAULT_BLOCK_SIZE

BLOCK = DEFAULT_BLOCK_SIZE
VOCAB = 150_000
PREAMBLE_TOKENS = 32
OUTPUT_TOKENS = (32, 160)
"""Generated tokens per request (uniform): what a reply adds to the next turn, and how long the
request decodes."""


@dataclass(frozen=True, slots=True)
class TraceRequest:
    blocks: tuple[int, ...]
    """Chained ids of the prompt's full blocks, and of the last partial block if any."""
    prompt_tokens: int
    output_tokens: int
    group: int


def chained_blocks(tokens: Sequence[int]) -> tuple[int, ...]:
    """Block ids as engines chain them (Python's tuple hash of ints is not salted: the same
    tokens give the same ids in every run)."""
    ids = []
    parent = 0
    for start in range(0, len(tokens), BLOCK):
        parent = hash((parent, *tokens[start : start + BLOCK]))
        ids.append(parent)
    return tuple(ids)


def _request(tokens: list[int], rng: random.Random, group: int) -> TraceRequest:
    return TraceRequest(chained_blocks(tokens), len(tokens), rng.randint(*OUTPUT_TOKENS), group)


def _tokens(rng: random.Random, low: int, high: int) -> list[int]:
    return [rng.randrange(VOCAB) for _ in range(rng.randint(low, high))]


def demo(n: int, seed: int) -> list[TraceRequest]:
    workload = Workload("sim", seed=seed)
    rng = random.Random(seed + 1)
    trace = []
    for _ in range(n):
        sim = workload.next_request()
        if "messages" in sim.body:
            messages = [Message(m["role"], m["content"]) for m in sim.body["messages"]]
            tokens = encode_chat(messages)
        else:
            tokens = [rng.randrange(VOCAB) for _ in range(len(sim.body["prompt"].split()) * 2)]
        request = _request(tokens, rng, sim.group if sim.group is not None else -1)
        trace.append(request)
        reply = " ".join(f"w{rng.randrange(5000)}" for _ in range(request.output_tokens // 2))
        workload.record_reply(sim, reply)
    return trace


def zipf(n: int, seed: int, groups: int = 240, exponent: float = 1.1) -> list[TraceRequest]:
    rng = random.Random(seed)
    prefixes = [_tokens(rng, 1024, 2048) for _ in range(groups)]
    weights = [1.0 / (rank + 1) ** exponent for rank in range(groups)]
    order = list(range(groups))
    rng.shuffle(order)  # popularity unrelated to the group's number
    trace = []
    for _ in range(n):
        group = order[rng.choices(range(groups), weights)[0]]
        trace.append(_request(prefixes[group] + _tokens(rng, 32, 256), rng, group))
    return trace


def llm_d(
    n: int, seed: int, preamble: bool = False, groups: int = 150, users: int = 5, turns: int = 5
) -> list[TraceRequest]:
    rng = random.Random(seed)
    lead = random.Random(-1).choices(range(VOCAB), k=PREAMBLE_TOKENS) if preamble else []
    prefixes = [_tokens(rng, 1024, 1024) for _ in range(groups)]
    history: dict[int, list[int]] = {}
    turn: dict[int, int] = {}
    trace = []
    for _ in range(n):
        user = rng.randrange(groups * users)
        group = user // users
        if turn.get(user, turns) >= turns:
            history[user], turn[user] = list(prefixes[group]), 0
        history[user] += _tokens(rng, 64, 192)
        turn[user] += 1
        request = _request(lead + history[user], rng, group)
        trace.append(request)
        history[user] += [rng.randrange(VOCAB) for _ in range(request.output_tokens)]
    return trace


WORKLOADS: dict[str, Callable[[int, int], list[TraceRequest]]] = {
    "demo": demo,
    "zipf": zipf,
    "llm-d": llm_d,
    "llm-d+preamble": lambda n, seed: llm_d(n, seed, preamble=True),
}
