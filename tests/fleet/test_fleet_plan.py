"""The fleet's port scheme and naming, and a clean start and stop."""

import socket

import pytest

from kvadmin.engines.models import Engine
from kvadmin.fleet.fleet import Fleet, plan_fleet
from kvadmin.fleet.pod import SimPod
from kvadmin.fleet.wire import Encoding
from tests.conftest import http_json
from tests.fleet.conftest import StartFleet, local_config


def test_the_simulate_defaults_give_the_documented_ports() -> None:
    configs = plan_fleet(4, "vllm", base_port=5557, http_port=8100)
    assert [c.name for c in configs] == [f"vllm-{i}.default" for i in range(4)]
    assert [c.events_port for c in configs] == [5557, 5558, 5559, 5560]
    assert [c.replay_port for c in configs] == [6557, 6558, 6559, 6560]
    assert [c.http_port for c in configs] == [8100, 8101, 8102, 8103]


def test_data_parallel_pods_leave_room_for_their_ranks() -> None:
    configs = plan_fleet(3, "sglang", base_port=5557, http_port=8100, dp_size=2)
    assert [c.events_port for c in configs] == [5557, 5559, 5561]
    assert [c.replay_port for c in configs] == [6557, 6559, 6561]


def test_the_hicache_write_policy_applies_to_the_sglang_pods_only() -> None:
    configs = plan_fleet(2, ["vllm", "sglang"], cpu_blocks=8, sglang_write_policy="write_back")
    assert [c.write_policy for c in configs] == [None, "write_back"]
    pod = SimPod(
        local_config("sglang-0.default", "sglang", cpu_blocks=8, write_policy="write_back")
    )
    try:
        assert pod.caches[0].write_policy == "write_back"
    finally:
        pod.close()


def test_mixed_kinds_alternate_and_count_per_kind() -> None:
    configs = plan_fleet(3, ["vllm", "sglang"], cpu_blocks=64, disk_blocks=128, replay=False)
    assert [c.name for c in configs] == ["vllm-0.default", "sglang-0.default", "vllm-1.default"]
    assert [c.wire_encoding for c in configs] == [
        Encoding.VLLM_MAP,
        Encoding.SGLANG_MAP,
        Encoding.VLLM_MAP,
    ]
    assert [c.disk_blocks for c in configs] == [0, 128, 0]
    assert all(c.replay_port is None for c in configs)


def test_overlapping_ports_are_refused() -> None:
    with pytest.raises(ValueError, match="port 8101"):
        plan_fleet(2, "vllm", base_port=8100, http_port=8101, replay=False)
    with pytest.raises(ValueError, match="unknown engine kind"):
        plan_fleet(1, "tgi")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="not a vllm"):
        local_config(encoding="sglang-map")


def test_a_pods_engine_fields_make_a_valid_registry_row() -> None:
    [config] = plan_fleet(1, "sglang", namespace="sim", topic="kv-events")
    engine = Engine(**config.engine_fields())
    engine.clean_fields()
    assert engine.events_endpoint_for(0) == "tcp://127.0.0.1:5557"
    assert engine.replay_endpoint_for(0) == "tcp://127.0.0.1:6557"
    assert engine.http_base_url == "http://127.0.0.1:8100"


def test_a_port_in_use_fails_the_start_and_releases_the_others() -> None:
    config = local_config()
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", config.http_port))
        with pytest.raises(OSError):
            Fleet([config]).start()
    with Fleet([config]) as fleet:
        assert http_json(f"{config.http_url}/tokenize", {"prompt": "ok"})[0] == 200
        assert fleet.pod(config.name).name == config.name


def test_stop_closes_every_port(start_fleet: StartFleet) -> None:
    configs = [local_config(), local_config("sglang-0.default", "sglang")]
    fleet = start_fleet(*configs)
    fleet.stop()
    with Fleet(configs):
        pass
