"""Saving, restoring and listing tier-weight versions: the one place that writes them.

Every write appends exactly one `TierWeightsVersion` and, once the transaction commits,
publishes it to every scoring process (`active.publish`).
"""

import logging
from dataclasses import dataclass

import redis
from django.db import IntegrityError, transaction

from kvadmin.weights import active
from kvadmin.weights.config import SPEC_DEFAULTS, Change, WeightConfig, diff
from kvadmin.weights.models import TierWeightsVersion

log = logging.getLogger(__name__)

EDIT_PERMISSION = "weights.change_tierweightsversion"
"""Saving and restoring need this; any logged-in user may look."""

REASON_MAX_LENGTH = TierWeightsVersion._meta.get_field("reason").max_length


class NothingChanged(Exception):
    """The configuration equals the current version: no version is added."""


class StaleDraft(Exception):
    """Another version was saved since the draft was loaded: saving would undo it unseen."""

    def __init__(self, base: int, current: "TierWeightsVersion | None") -> None:
        self.base = base
        self.current = current
        who = f" by {current.author}" if current else ""
        number = current.version if current else 0
        super().__init__(
            f"version {number} was saved{who} after you loaded version {base}: "
            "reload the page and apply your change again"
        )


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    version: TierWeightsVersion
    changes: list[Change]


def current_version() -> TierWeightsVersion:
    """The latest saved version; before any (an empty table) the SPEC defaults, unsaved, as
    version 0."""
    return TierWeightsVersion.objects.order_by("-version").first() or _unsaved_defaults()


def save_version(
    config: WeightConfig,
    *,
    author: str,
    reason: str = "",
    base_version: int | None = None,
    restored_from: int | None = None,
) -> TierWeightsVersion:
    """Append `config` as the next version. With `base_version` (the version a draft was
    made from), refuse with `StaleDraft` when another save came in between."""
    reason = reason.strip()
    if len(reason) > REASON_MAX_LENGTH:
        raise ValueError(f"the reason is longer than {REASON_MAX_LENGTH} characters")
    try:
        with transaction.atomic():
            latest = TierWeightsVersion.objects.select_for_update().order_by("-version").first()
            number = latest.version if latest else 0
            if base_version is not None and base_version != number:
                raise StaleDraft(base_version, latest)
            if config == (latest.weight_config if latest else SPEC_DEFAULTS):
                raise NothingChanged(f"version {number} already has these weights")
            saved = TierWeightsVersion.objects.create(
                version=number + 1,
                author=author,
                reason=reason,
                config=config.to_json(),
                restored_from=restored_from,
            )
            transaction.on_commit(lambda: _announce(saved.version, config))
    except IntegrityError:
        # Another save took the same number between our read and our insert.
        raise StaleDraft(base_version or 0, current_version()) from None
    return saved


def restore_version(version: int, *, author: str) -> TierWeightsVersion:
    """Append a copy of an earlier version as the newest one (TierWeightsVersion.DoesNotExist
    when there is no such version; NothingChanged when it equals the current one)."""
    old = TierWeightsVersion.objects.get(version=version)
    return save_version(
        old.weight_config,
        author=author,
        reason=f"restored version {version}",
        restored_from=version,
    )


def history(limit: int = 50) -> list[HistoryEntry]:
    """The latest `limit` versions, newest first, each with what it changed from the one
    before it (the first version against the SPEC defaults)."""
    versions = list(TierWeightsVersion.objects.order_by("-version")[: limit + 1])
    entries = []
    for index, version in enumerate(versions[:limit]):
        previous = versions[index + 1].weight_config if index + 1 < len(versions) else None
        before = previous if previous is not None else SPEC_DEFAULTS
        entries.append(HistoryEntry(version, diff(before, version.weight_config)))
    return entries


def _announce(version: int, config: WeightConfig) -> None:
    """Publish a committed version. The version is saved whatever happens here; when Redis
    refuses, scoring keeps the previous weights until `tier_weights publish` (the page says
    so, comparing the saved and the active version)."""
    try:
        active.publish(version, config)
    except redis.RedisError as error:
        log.error("tier weights version %s saved but not published: %s", version, error)


def _unsaved_defaults() -> TierWeightsVersion:
    return TierWeightsVersion(
        version=0, author="kvadmin", reason="kthena defaults", config=SPEC_DEFAULTS.to_json()
    )
