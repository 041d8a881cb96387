"""Choosing one pod from scores: the highest score wins; ties are broken by rendezvous hashing.

Why rendezvous hashing of the request's first block hash, and not an arbitrary pick (kthena
takes whichever tied pod its map iteration yields):

1. Identical prefixes land on the same pod. Requests sharing their first block (the same
   system prompt or conversation start) that tie, for example because nobody holds them yet,
   all go to one pod, which then caches that prefix once; the next such request scores a hit
   there instead of warming a second copy elsewhere.
2. Distinct cold prefixes spread evenly. Each (first block, pod) pair gets an independent
   pseudo-random rank, so over many prefixes each tied pod wins equally often.
3. Changing the candidate set moves only what it must. When a pod joins or leaves, only the
   prefixes whose winner it is (or becomes) move; every other prefix keeps its pod and its
   cache, unlike hashing modulo the number of pods.
4. It is stateless and the same in every process: web replicas, the CLI and replays of
   recorded decisions under other weights (`rescore`) all pick the same pod.

The hash is BLAKE2b over "{first_block}|{pod}" (Python's `hash()` is salted per process). A
request with no hit at all ties every candidate at score 0. A scored pod with score 0 (its
media weigh 0) ties with the candidates that hold nothing: its cached blocks are worth nothing
under the weights in force.

Caveat: a prefix every pod holds equally (a shared system prompt) is a tie too, so all
requests starting with it pick the same pod. kthena combines this score with load-aware
scorers; kvadmin's score is the cache-affinity part only. The `ttft` policy
(`scoring.policy`) prices load too, and keys this tie-break past the prefix every tied pod holds.
"""

from collections.abc import Iterable, Mapping
from hashlib import blake2b


def rendezvous_rank(first_block: int, pod: str) -> int:
    """The pod's pseudo-random rank for this prefix; the highest rank wins a tie."""
    digest = blake2b(f"{first_block}|{pod}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def tie_break(first_block: int, pods: Iterable[str]) -> str | None:
    """The tied pod with the highest rendezvous rank (the pod id breaks equal ranks); None when
    there is no pod."""
    return max(pods, key=lambda pod: (rendezvous_rank(first_block, pod), pod), default=None)


def choose(
    scores: Mapping[str, int], candidates: Iterable[str], first_block: int
) -> tuple[str | None, bool]:
    """The pod to route to and whether the tie-break decided it.

    `scores` holds the scored pods (those owning the first block); `candidates` every pod the
    request may go to, scored or not (a scored pod that is not listed still counts). A
    candidate without a score scores 0.
    """
    pods = set(candidates) | scores.keys()
    best = max((scores.get(pod, 0) for pod in pods), default=0)
    tied = [pod for pod in pods if scores.get(pod, 0) == best]
    if len(tied) == 1:
        return tied[0], False
    return tie_break(first_block, tied), bool(tied)
