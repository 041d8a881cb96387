"""Saving, restoring and listing tier-weight versions: the one place that writes them.

Every write appends exactly one `TierWeightsVersion` and, once the transaction commits,
publishes it to every scoring process (`active.publish`).
"""

import logging
from dataclasses import dataclass

import redis
from django.db import IntegrityError, transaction

from kvadmin.weights import active
from kvadmin.weights.config import KTHENA_DEFAULTS, Change, WeightConfig, diff
from kvadmin.weights.models import TierWeightsVersion

log = logging.getLogger(__name__)

EDIT_PERMISSION = "weights.change_tierweightsversion"
"""Saving and restoring need this; any logged-in user may look."""

REASON_MAX_LENGTH = TierWeightsVersion._meta.get_field("reason").max_length


class NothingChanged(Exception):
    """The configuration equals the current version: no version is added."""


class ReasonRequired(ValueError):
    """Every save and restore says why: the history is read when something went wrong."""

    def __init__(self) -> None:
        super().__init__("give a reason: the history shows it beside the change")


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    version: TierWeightsVersion
    changes: list[Change]

    def __str__(self) -> str:
        version = self.version
        reason = f" · “{version.reason}”" if version.reason else ""
        changes = "; ".join(str(change) for change in self.changes) or "no change"
        return (
            f"version {version.version} · {version.created_at:%Y-%m-%d %H:%M:%S} UTC · "
            f"{version.author}{reason}: {changes}"
        )


class StaleDraft(Exception):
    """Another version was saved since the draft was loaded: saving would undo it unseen.
    `saved_since` tells what those versions changed, who saved them, when and why."""

    def __init__(self, base: int, saved_since: list[HistoryEntry]) -> None:
        self.base = base
        self.saved_since = saved_since
        """Newest first."""
        if saved_since:
            newest = saved_since[0].version
            summary = f"version {newest.version} was saved by {newest.author} after you loaded"
        else:  # a base that was never saved (from the future, or made up)
            summary = f"the current version is {current_version().version}, not the one you loaded,"
        super().__init__(f"{summary} version {base}: reload the page and apply your change again")

    @property
    def details(self) -> list[str]:
        return [str(entry) for entry in self.saved_since]


def current_version() -> TierWeightsVersion:
    """The latest saved version; before any (an empty table) the kthena defaults, unsaved, as
    version 0."""
    return TierWeightsVersion.objects.order_by("-version").first() or _unsaved_defaults()


def save_version(
    config: WeightConfig, *, author: str, base_version: int, reason: str
) -> TierWeightsVersion:
    """Append `config` as the next version. `base_version` is the version the draft was made
    from: when another save came in between, refuse with `StaleDraft` (no silent overwrite).
    A blank `reason` raises `ReasonRequired`."""
    return _append(config, author=author, reason=reason, base_version=base_version)


def restore_version(
    version: int, *, author: str, base_version: int, reason: str
) -> TierWeightsVersion:
    """Append a copy of an earlier version as the newest one (TierWeightsVersion.DoesNotExist
    when there is no such version; NothingChanged when it equals the current one). Like a
    save, it is checked against the version the operator saw (`base_version`): restoring over
    a change someone else just saved raises `StaleDraft`, so that change is not undone unseen."""
    old = TierWeightsVersion.objects.get(version=version)
    if not reason.strip():
        raise ReasonRequired
    return _append(
        old.weight_config,
        author=author,
        reason=f"restored version {version}: {reason.strip()}",
        base_version=base_version,
        restored_from=version,
    )


def history(limit: int = 50, *, after: int = 0) -> list[HistoryEntry]:
    """The latest `limit` versions newer than `after`, newest first, each with what it
    changed from the one before it (the first version against the kthena defaults)."""
    newest = TierWeightsVersion.objects.filter(version__gte=after).order_by("-version")
    versions = list(newest[: limit + 1])
    entries = []
    for index, version in enumerate(versions[:limit]):
        if version.version <= after:  # fetched only as the one before the oldest entry
            break
        previous = versions[index + 1].weight_config if index + 1 < len(versions) else None
        before = previous if previous is not None else KTHENA_DEFAULTS
        entries.append(HistoryEntry(version, diff(before, version.weight_config)))
    return entries


def _append(
    config: WeightConfig,
    *,
    author: str,
    reason: str,
    base_version: int,
    restored_from: int | None = None,
) -> TierWeightsVersion:
    reason = reason.strip()
    if not reason:
        raise ReasonRequired
    if len(reason) > REASON_MAX_LENGTH:
        raise ValueError(f"the reason is longer than {REASON_MAX_LENGTH} characters")
    try:
        # Saves queue here, one at a time: on SQLite the transaction begins IMMEDIATE (the
        # write lock first, see settings.DATABASES); elsewhere select_for_update locks the
        # latest row. Either way the version read is still the latest when the next is written.
        with transaction.atomic():
            latest = TierWeightsVersion.objects.select_for_update().order_by("-version").first()
            number = latest.version if latest else 0
            if base_version != number:
                raise _Stale
            if config == (latest.weight_config if latest else KTHENA_DEFAULTS):
                raise NothingChanged(f"version {number} already has these weights")
            saved = TierWeightsVersion.objects.create(
                version=number + 1,
                author=author,
                reason=reason,
                config=config.to_json(),
                restored_from=restored_from,
            )
            transaction.on_commit(lambda: _announce(saved.version, config))
    except (_Stale, IntegrityError):
        # IntegrityError: another save took the same number between our read and our insert
        # (a database that does not serialise as above).
        raise StaleDraft(base_version, history(after=base_version)) from None
    return saved


class _Stale(Exception):
    """Leaves the transaction (rolled back) before StaleDraft reads what changed."""


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
        version=0, author="kvadmin", reason="kthena defaults", config=KTHENA_DEFAULTS.to_json()
    )
