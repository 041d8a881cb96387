"""API tokens for machine clients (routers, gateways, engines pushing events)."""

import hashlib
import secrets
from collections.abc import Iterable

from django.db import models
from django.utils import timezone

from kvadmin.api.scopes import DEFAULT_GRANTS, Grants, parse_grants, validate_grants

TOKEN_PREFIX = "kva_"


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class ApiTokenQuerySet(models.QuerySet["ApiToken"]):
    def active(self) -> "ApiTokenQuerySet":
        return self.filter(revoked_at__isnull=True)


class ApiToken(models.Model):
    """Only the SHA-256 of a token is stored; the token itself is shown once at creation."""

    name = models.CharField(max_length=100, unique=True)
    digest = models.CharField(max_length=64, unique=True, editable=False)
    hint = models.CharField(max_length=12, editable=False, help_text="First characters.")
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True)
    scopes = models.CharField(
        max_length=2000,
        default=DEFAULT_GRANTS,
        validators=[validate_grants],
        help_text="Space-separated: score, decisions:read, metrics, events:push (every pod) "
        "or events:push=POD,POD (those pods only).",
    )

    objects = ApiTokenQuerySet.as_manager()

    class Meta:
        verbose_name = "API token"
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.name} ({self.hint}…)"

    @property
    def grants(self) -> Grants:
        return parse_grants(self.scopes)

    @classmethod
    def issue(
        cls, name: str, scopes: str | Iterable[str] = DEFAULT_GRANTS
    ) -> tuple["ApiToken", str]:
        """Create a token with `scopes` (grants text, see kvadmin.api.scopes; ValidationError
        when unreadable); returns the row and the plain token, which is not kept anywhere."""
        grants = str(parse_grants(scopes))
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        row = cls.objects.create(name=name, digest=digest(token), hint=token[:8], scopes=grants)
        return row, token

    def revoke(self) -> None:
        self.revoked_at = timezone.now()
        self.save(update_fields=["revoked_at"])
