"""A saved version as kthena's router reads it (compatibility.md 2.5), and as JSON for automation.

The YAML is the fragment of the router ConfigMap's `routerConfiguration` that carries the
`kvcache-aware` plugin arguments; an operator merges it into `kthena-router-config`. kthena
fixes the fallback at 1.0, so another fallback is exported with a warning: the router would
score unknown media differently from kvadmin. Both say which kthena the index serves
(compatibility.md 2.7): kthena main ignores tierWeights. kthena has no TTFT policy: the
version's TTFT parameters are kvadmin's alone and appear only in the JSON.

kthena reads the ConfigMap once, at start: saving a version changes kvadmin's scoring at once
and kthena's router only once the ConfigMap is applied and the router restarted
(`KUBECTL_COMMANDS`).
"""

from typing import Any

import yaml

from kvadmin.conf import knob
from kvadmin.index.serving import Serving
from kvadmin.weights import parameters
from kvadmin.weights.models import TierWeightsVersion
from scoring.values import ValueFormat

PLUGIN = "kvcache-aware"
CONFIGMAP = "kthena-router-config"
ROUTER_DEPLOYMENT = "kthena-router"
NAMESPACE = "kthena-system"
"""kthena's default namespace; the page says to use the one kthena is installed in."""

KUBECTL_COMMANDS = (
    f"kubectl -n {NAMESPACE} edit configmap {CONFIGMAP}",
    f"kubectl -n {NAMESPACE} rollout restart deployment {ROUTER_DEPLOYMENT}",
)
"""Merge the fragment into the ConfigMap's `routerConfiguration`, then restart the router:
kthena reads its configuration only at start (compatibility.md 2.5)."""


def kthena_args(version: TierWeightsVersion) -> dict[str, Any]:
    """`scheduler.pluginConfig[name=kvcache-aware].args`: tierWeights with lower-case names,
    the defaults included."""
    weights = version.weight_config.tier_weights()
    return {
        "blockSizeToHash": knob("BLOCK_SIZE"),
        "maxBlocksToMatch": knob("MAX_BLOCKS"),
        "tierWeights": weights.as_kthena_config(),
    }


def kthena_yaml(version: TierWeightsVersion, serving: Serving | None) -> str:
    """The ConfigMap fragment, with a header naming the version and which kthena the index
    serves (`serving`; None when the index did not answer)."""
    fragment = {"scheduler": {"pluginConfig": [{"name": PLUGIN, "args": kthena_args(version)}]}}
    header = [
        f"# kvadmin tier weights version {version.version}: the {PLUGIN} plugin arguments",
        f"# for routerConfiguration in the {CONFIGMAP} ConfigMap. kthena's router changes only",
        "# when the ConfigMap is applied and the router restarted:",
        *(f"#   {command}" for command in KUBECTL_COMMANDS),
        "# (TTFT parameters are kvadmin's own: kthena has no TTFT policy.)",
    ]
    fallback = version.weight_config.fallback
    if fallback != 1.0:
        header.append(
            f"# WARNING: kvadmin's fallback is {fallback:g}; kthena always weighs unknown "
            "media 1.0."
        )
    if serving is None:
        header.append("# The index is unavailable: which kthena it serves is not known.")
    else:
        header.append(
            f"# The index writes {serving.configured} values: it serves {serving.kthena}"
            + ("." if serving.configured is ValueFormat.TIERED else ", which ignores tierWeights.")
        )
        if serving.disagreement:
            header.append(f"# WARNING: {serving.disagreement}")
    body = yaml.safe_dump(fragment, sort_keys=False, default_flow_style=False)
    return "\n".join(header) + "\n" + body


def weights_json(version: TierWeightsVersion, serving: Serving | None) -> dict[str, Any]:
    """The version for scripts: what is configured, what scoring applies, its origin, and
    which kthena the index serves (`index`, null when the index did not answer)."""
    config = version.weight_config
    weights = config.tier_weights()
    return {
        "version": version.version,
        "created_at": version.created_at.isoformat() if version.created_at else None,
        "author": version.author,
        "reason": version.reason,
        "configured": dict(config.weights),
        "notes": dict(config.notes),
        "fallback": config.fallback,
        "tierWeights": weights.as_kthena_config(),
        "kthenaCompatible": weights.kthena_compatible,
        "kthena": {"name": PLUGIN, "args": kthena_args(version)},
        "ttft": parameters.to_json(config.ttft),
        "index": serving.as_json() if serving else None,
    }
