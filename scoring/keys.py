"""The one source of truth for the Redis key layout.

kthena-compatible keys (SPEC 2.2, 2.3) are read by kthena's Go router and must not change.
The `kvadmin:` keys are kvadmin's own bookkeeping beside them.
"""

BLOCK_KEY_PREFIX = "matrix:kv:block:"
ENGINE_HASH_TTL_SECONDS = 86400


def block_key(model: str, std_hash: int) -> str:
    """HASH: field pod id -> "{unix_seconds}|{MEDIUM}" (SPEC 2.2)."""
    return f"{BLOCK_KEY_PREFIX}{model}@{std_hash}"


def engine_hash_key(engine_kind: str, pod: str, engine_hash: int | str) -> str:
    """STRING: the decimal standardized hash for one engine hash of one pod (SPEC 2.3).

    `engine_kind` is "vllm" or "sglang"; `engine_hash` is the engine's integer or its
    decimal/hex text form for byte hashes.
    """
    return f"{engine_kind}:kv:block:{pod}@{engine_hash}"


def block_value(timestamp: int, medium: str | None) -> str:
    """The field value kthena reads: "ts" for no medium, otherwise "ts|MEDIUM"."""
    return f"{timestamp}|{medium}" if medium else str(timestamp)
