"""What an API token may do: its scopes, written as one line of grants.

A grant is a scope name, and `events:push` may name the pods it is limited to:
`score decisions:read events:push=vllm-0.default,vllm-1.default metrics`. `events:push` alone
is every pod. The same text is what `api_token create --scope` takes, what the database and
the admin hold and what `api_token list` shows: one syntax everywhere, read by `parse_grants`.
"""

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from django.core.exceptions import ValidationError

from kvadmin.engines.models import validate_pod_id


class Scope(StrEnum):
    SCORE = "score"  # POST /api/v1/score
    DECISIONS_READ = "decisions:read"  # GET /api/v1/decisions
    EVENTS_PUSH = "events:push"  # POST /api/v1/events/<pod>, for the granted pods
    METRICS = "metrics"  # GET /metrics


DEFAULT_GRANTS = Scope.SCORE.value
"""Least privilege: a token created without scopes may score, nothing else."""

ALL_GRANTS = " ".join(scope.value for scope in Scope)
"""Every scope, every pod: the power every token had before scopes existed."""


@dataclass(frozen=True, slots=True)
class Grants:
    scopes: frozenset[Scope]
    push_pods: frozenset[str] | None = None
    """The pods `events:push` is limited to; None is every pod."""

    def allows(self, scope: Scope, pod: str | None = None) -> bool:
        if scope not in self.scopes:
            return False
        if scope is Scope.EVENTS_PUSH and self.push_pods is not None:
            return pod in self.push_pods
        return True

    def __str__(self) -> str:
        items = []
        for scope in Scope:  # canonical order
            if scope not in self.scopes:
                continue
            if scope is Scope.EVENTS_PUSH and self.push_pods is not None:
                items.append(f"{scope}={','.join(sorted(self.push_pods))}")
            else:
                items.append(scope.value)
        return " ".join(items)


def parse_grants(items: str | Iterable[str]) -> Grants:
    """Grants from their text (one string of space-separated grants, or several strings);
    ValidationError naming the grant at fault."""
    if isinstance(items, str):
        items = [items]
    words = [word for item in items for word in item.split()]
    if not words:
        raise ValidationError("grant at least one scope (a token that may do nothing: revoke it)")
    scopes: set[Scope] = set()
    push_pods: set[str] | None = set()
    push_everywhere = False
    for word in words:
        name, equals, pods = word.partition("=")
        try:
            scope = Scope(name)
        except ValueError:
            raise ValidationError(
                "%(word)r is not a scope (one of %(scopes)s)",
                params={"word": word, "scopes": ", ".join(Scope)},
            ) from None
        scopes.add(scope)
        if scope is not Scope.EVENTS_PUSH:
            if equals:
                raise ValidationError(
                    "%(word)r: only events:push names pods", params={"word": word}
                )
            continue
        if not equals:
            push_everywhere = True
            continue
        named = [pod for pod in pods.split(",") if pod]
        if not named:
            raise ValidationError(
                "%(word)r names no pod (events:push alone is every pod)", params={"word": word}
            )
        for pod in named:
            validate_pod_id(pod)
        push_pods |= set(named)
    if push_everywhere:
        push_pods = None
    return Grants(frozenset(scopes), frozenset(push_pods) if push_pods is not None else None)


def validate_grants(text: str) -> None:
    parse_grants(text)
