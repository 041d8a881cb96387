"""The shipped gateway configs: Envoy's is valid for the real binary and asks the picker the
Procfile starts; the Kubernetes manifests point the InferencePool at the picker's Service."""

import subprocess
from pathlib import Path

import yaml

from kvadmin.gateway import envoy
from kvadmin.stack import PORTS
from tests.conftest import ROOT
from tests.waiting import patient

KUBERNETES = ROOT / "deploy" / "kubernetes"


def test_the_shipped_envoy_config_is_valid(tmp_path: Path) -> None:
    checked = subprocess.run(
        [envoy.binary(), "--mode", "validate", "-c", str(envoy.SHIPPED)],
        capture_output=True, text=True, timeout=patient(120),
    )  # fmt: skip
    assert checked.returncode == 0, checked.stdout + checked.stderr
    for balancing in ("round_robin", "least_request"):
        path = envoy.write(
            envoy.render("127.0.0.1:1", "127.0.0.1:2", [], ["127.0.0.1:3"], balancing),
            tmp_path / f"{balancing}.yaml",
        )
        validated = subprocess.run(
            [envoy.binary(), "--mode", "validate", "-c", str(path)],
            capture_output=True,
            timeout=patient(120),
        )
        assert validated.returncode == 0


def test_envoy_and_the_procfile_agree_on_the_pickers_address() -> None:
    config = envoy.shipped()
    picker = next(c for c in config["static_resources"]["clusters"] if c["name"] == "picker")
    socket = picker["load_assignment"]["endpoints"][0]["lb_endpoints"][0]["endpoint"]["address"]
    assert socket["socket_address"]["port_value"] == PORTS["picker"]
    listener = config["static_resources"]["listeners"][0]["address"]["socket_address"]
    assert listener["port_value"] == PORTS["gateway"]
    procfile = (ROOT / "Procfile").read_text()
    assert f"endpoint_picker --host 127.0.0.1 --port {PORTS['picker']}" in procfile
    assert f"--gateway http://127.0.0.1:{PORTS['gateway']}" in procfile


def test_the_inference_pool_asks_the_pickers_service() -> None:
    documents = [
        document
        for path in sorted(KUBERNETES.glob("*.yaml"))
        for document in yaml.safe_load_all(path.read_text())
    ]
    by_kind = {document["kind"]: document for document in documents}
    pool, service = by_kind["InferencePool"], by_kind["Service"]
    assert pool["apiVersion"] == "inference.networking.k8s.io/v1"
    reference = pool["spec"]["endpointPickerRef"]
    assert reference["name"] == service["metadata"]["name"]
    assert reference["port"]["number"] in [port["port"] for port in service["spec"]["ports"]]
    route = by_kind["HTTPRoute"]["spec"]["rules"][0]["backendRefs"][0]
    assert (route["kind"], route["name"]) == ("InferencePool", pool["metadata"]["name"])
    container = by_kind["Deployment"]["spec"]["template"]["spec"]["containers"][0]
    assert container["command"][:3] == ["python", "manage.py", "endpoint_picker"]
    assert container["readinessProbe"]["grpc"]["service"] == "readiness"
