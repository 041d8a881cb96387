"""When a simulated engine copies KV blocks to its lower tiers: the write policies of the engines'
offloading, as their sources implement them. Both prefix-cache models follow these rules: the
timed fleet's (`fleet.cache`, which publishes KV events) and the routing benchmark's
(`bench/sim/cache.py`, which prices TTFT).

- vLLM, offloading connector (`OffloadingConnector`, CPU backend): its one policy,
  `StoreOnComputePolicy` ("store blocks as soon as they are computed, the default policy"), queues
  every full block of a scheduled request that the CPU tier does not hold yet (computed blocks
  and GPU prefix hits alike; blocks loaded from CPU are skipped), and touches the request's
  blocks in the CPU tier's LRU. The CPU tier is an LRU of its own (`LRUOffloadingManager`): it
  may evict a block the GPU still holds. Events: one `BlockStored(medium="CPU")` without tokens
  per completed store, one `BlockRemoved(medium="CPU")` per eviction batch. Here: write_through.
- SGLang, HiCache (`HiRadixCache`, `--hicache-write-policy`, default `write_through`): a radix
  node is backed up to host memory when its hit count reaches the policy's threshold, 1 for
  write_through (every inserted node, at once), 2 for write_through_selective (on its second
  use); write_back backs a node up only when the GPU evicts it. The host pool evicts only nodes
  the GPU no longer holds (`evict_host` skips nodes that are not evicted), so a full host pool of
  GPU-resident nodes refuses the backup. With a storage backend (the DISK tier here), every
  completed host backup is written on to storage (`write_backup_storage`), whatever the policy.

The simulation keeps the policies' effects and drops their asynchrony: a copy lands (and is
announced) in the step that serves the request.
"""

from typing import Final, Literal

WritePolicy = Literal["write_through", "write_through_selective", "write_back"]

WRITE_POLICIES: Final[dict[str, tuple[WritePolicy, ...]]] = {
    "vllm": ("write_through",),
    "sglang": ("write_through", "write_through_selective", "write_back"),
}
"""The policies each engine kind implements."""
DEFAULT_WRITE_POLICY: Final[dict[str, WritePolicy]] = {
    "vllm": "write_through",
    "sglang": "write_through",
}
HOST_EVICTS_GPU_RESIDENT: Final = {"vllm": True, "sglang": False}
"""Whether the first lower tier may evict a block the GPU still holds."""


def write_policy_for(kind: str, policy: str | None = None) -> WritePolicy:
    """The policy a `kind` engine runs: `policy`, or the engine's default when None. A policy the
    engine does not implement raises ValueError."""
    if kind not in WRITE_POLICIES:
        raise ValueError(f"unknown engine kind {kind!r}")
    if policy is None:
        return DEFAULT_WRITE_POLICY[kind]
    if policy not in WRITE_POLICIES[kind]:
        raise ValueError(
            f"a {kind} engine offloads with {', '.join(WRITE_POLICIES[kind])}, not {policy!r}"
        )
    return policy  # type: ignore[return-value]  (checked against the kind's policies)


def backup_threshold(policy: WritePolicy) -> int | None:
    """Uses of a GPU block after which it is copied to the first lower tier; None: only when the
    GPU evicts it (write_back)."""
    return {"write_through": 1, "write_through_selective": 2, "write_back": None}[policy]
