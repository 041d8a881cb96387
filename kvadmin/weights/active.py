"""The tier weights every scoring process uses right now, with the version that names them.

Issue 7 backs this with saved versions in the database and a Redis broadcast so a saved
version reaches every web and worker process within a second; until then the defaults apply.
"""

from dataclasses import dataclass

from scoring.weights import TierWeights


@dataclass(frozen=True, slots=True)
class ActiveWeights:
    version: int
    weights: TierWeights


_DEFAULTS = ActiveWeights(version=0, weights=TierWeights())


def active_weights() -> ActiveWeights:
    return _DEFAULTS
