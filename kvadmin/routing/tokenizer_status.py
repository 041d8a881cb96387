"""What the pod page shows of a model's local tokenizer: which files, the consistency checks
since it was (re)armed, whether the guard disabled it, how often requests fell back, and the
pod's own checks (a dissenting engine is left out of them)."""

from dataclasses import dataclass

import redis

from kvadmin.engines.models import Engine
from kvadmin.metrics import families as f
from kvadmin.metrics.families import label_field
from kvadmin.routing import tokenizer_guard
from kvadmin.routing.tokenizer_guard import EngineGuard, GuardState

FALLBACK_REASONS = ("template", "unavailable", "disabled")
CHECK_RESULTS = ("match", "mismatch", "dissent", "inconclusive", "skipped")


@dataclass(frozen=True, slots=True)
class TokenizerStatus:
    model: str
    path: str
    guard: GuardState
    checks: dict[str, int]
    """All-time checks by result (the /metrics counter)."""
    fallbacks: dict[str, int]
    """All-time fallbacks to the engines by reason."""
    engine: EngineGuard
    """The pod's own checks since the tokenizer was (re)armed."""

    @property
    def disabled(self) -> bool:
        return self.guard.disabled_at is not None


def tokenizer_status(model: str, client: redis.Redis, pod: str) -> TokenizerStatus | None:
    """The model's local tokenizer as `pod`'s page shows it; None when no engine of the
    model names a tokenizer."""
    path = (
        Engine.objects.filter(model=model)
        .exclude(tokenizer="")
        .order_by("pod")
        .values_list("tokenizer", flat=True)
        .first()
    )
    if path is None:
        return None
    pipe = client.pipeline(transaction=False)
    pipe.hmget(f.TOKENIZER_CHECKS.key, [label_field((model, r)) for r in CHECK_RESULTS])
    pipe.hmget(f.LOCAL_TOKENIZER_FALLBACKS.key, [label_field((model, r)) for r in FALLBACK_REASONS])
    checks, fallbacks = pipe.execute()
    return TokenizerStatus(
        model=model,
        path=path,
        guard=tokenizer_guard.state(model, client),
        checks={r: int(n or 0) for r, n in zip(CHECK_RESULTS, checks, strict=True)},
        fallbacks={r: int(n or 0) for r, n in zip(FALLBACK_REASONS, fallbacks, strict=True)},
        engine=tokenizer_guard.engine_state(model, pod, client),
    )
