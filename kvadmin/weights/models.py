"""Saved tier-weight versions: the history operators browse and restore from. A version holds
the tier weights and the `ttft` policy's parameters (kvadmin.weights.parameters).

Rows are never changed or deleted: a save appends one version, a restore appends a copy of an
old one. The latest row is what scoring uses (published to every process by `active`).
"""

from django.db import models
from django.utils import timezone

from kvadmin.weights.config import WeightConfig


class TierWeightsVersion(models.Model):
    version = models.PositiveIntegerField(unique=True)
    created_at = models.DateTimeField(default=timezone.now)
    author = models.CharField(
        max_length=150,
        help_text="Who saved it, as text: the history outlives user accounts.",
    )
    reason = models.CharField(max_length=500, blank=True)
    config = models.JSONField(
        help_text='{"weights": {medium: w}, "fallback": w, "notes": {...}, "ttft": {...}}'
    )
    restored_from = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["-version"]
        verbose_name = "tier weights version"

    def __str__(self) -> str:
        return f"tier weights version {self.version}"

    @property
    def weight_config(self) -> WeightConfig:
        return WeightConfig.from_json(self.config)
