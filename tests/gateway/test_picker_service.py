"""The picker's gRPC server: the standard health service answers `liveness`, `readiness` and
the ext_proc service's name; TLS server credentials serve TLS clients only."""

import subprocess

import grpc
import pytest
from grpc_health.v1 import health_pb2

from tests.conftest import stop_process
from tests.gateway.conftest import health, start_picker
from tests.waiting import wait_until

pytestmark = pytest.mark.django_db(transaction=True)

SERVING = health_pb2.HealthCheckResponse.SERVING


def test_health_names_the_probes_and_the_ext_proc_service(picker_env) -> None:
    picker = start_picker(picker_env)
    try:
        for service in ("liveness", "readiness", "envoy.service.ext_proc.v3.ExternalProcessor"):
            assert health(picker.address, service) == SERVING
        with pytest.raises(grpc.RpcError) as unknown:
            health(picker.address, "no.such.Service")
        assert unknown.value.code() == grpc.StatusCode.NOT_FOUND
    finally:
        stop_process(picker.process)


def test_with_tls_credentials_it_serves_tls_clients_only(picker_env, tmp_path) -> None:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"]
        + ["-keyout", str(key), "-out", str(cert), "-subj", "/CN=localhost"]
        + ["-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
        check=True,
        capture_output=True,
    )
    picker = start_picker(picker_env, "--tls-cert", str(cert), "--tls-key", str(key))
    try:
        credentials = grpc.ssl_channel_credentials(cert.read_bytes())

        def serving() -> bool:
            assert picker.process.poll() is None, "the picker exited"
            try:
                return health(picker.address, "readiness", credentials) == SERVING
            except grpc.RpcError:
                return False

        wait_until(serving, timeout=60, what="the TLS picker to serve")
        with pytest.raises(grpc.RpcError):
            health(picker.address, "readiness")  # plaintext: refused
    finally:
        stop_process(picker.process)
