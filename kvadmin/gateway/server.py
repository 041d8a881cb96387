"""`manage.py endpoint_picker`: the picker's gRPC server (grpcio's asyncio server) with the
standard health service (`liveness`, `readiness` and the ext_proc service's name, as the
Gateway API Inference Extension's pickers answer them), and a Prometheus endpoint for its
counters.

The ext_proc protocol has no authentication: the port is for the gateway inside the
cluster. It binds the address it is given (127.0.0.1 by default), and takes TLS server
credentials (a certificate and key, and optionally a CA whose clients alone may connect).
"""

import asyncio
import logging
import signal
from dataclasses import dataclass
from pathlib import Path

import grpc
from envoy.service.ext_proc.v3 import external_processor_pb2_grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1._async import HealthServicer
from prometheus_client import start_http_server

from kvadmin.conf import knob
from kvadmin.gateway import READY_LINE, counters
from kvadmin.gateway.picker import EndpointPicker
from kvadmin.gateway.protocol import EXT_PROC

log = logging.getLogger(__name__)

HEALTH_SERVICES = ("", "liveness", "readiness", EXT_PROC)


@dataclass(frozen=True, slots=True)
class Tls:
    certificate: Path
    key: Path
    client_ca: Path | None = None

    def credentials(self) -> grpc.ServerCredentials:
        pair = [(self.key.read_bytes(), self.certificate.read_bytes())]
        if self.client_ca is None:
            return grpc.ssl_server_credentials(pair)
        return grpc.ssl_server_credentials(
            pair, root_certificates=self.client_ca.read_bytes(), require_client_auth=True
        )


MESSAGE_HEADROOM_BYTES = 1024 * 1024
"""What an ext_proc message holds beside the body: its headers, attributes, metadata."""


def server_options() -> list[tuple[str, int]]:
    """gRPC's server settings: a message may be as long as the longest body the picker takes
    and what comes with it (gRPC's default, 4 MiB, refused one: Envoy's fail-open took that
    for a picker failure and passed the request unrouted, not the picker's 413)."""
    return [
        ("grpc.so_reuseport", 0),
        ("grpc.max_receive_message_length", knob("PICKER_MAX_BODY_BYTES") + MESSAGE_HEADROOM_BYTES),
    ]


async def serve(host: str, port: int, metrics_port: int | None, tls: Tls | None) -> None:
    """Serve until SIGTERM or SIGINT, then drain: health says NOT_SERVING first, streams in
    flight get a grace period."""
    server = grpc.aio.server(options=server_options())
    picker = EndpointPicker()
    external_processor_pb2_grpc.add_ExternalProcessorServicer_to_server(picker, server)
    health = HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health, server)
    address = f"{host}:{port}"
    if tls is None:
        bound = server.add_insecure_port(address)
    else:
        bound = server.add_secure_port(address, tls.credentials())
    if not bound:
        raise SystemExit(f"endpoint picker: cannot listen on {address}")
    if metrics_port is not None:
        start_http_server(metrics_port, addr=host, registry=counters.registry)
    await server.start()
    for name in HEALTH_SERVICES:
        await health.set(name, health_pb2.HealthCheckResponse.SERVING)
    print(f"{READY_LINE} {host}:{bound} ({'TLS' if tls else 'plaintext'})", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    await stop.wait()
    await health.enter_graceful_shutdown()
    await server.stop(grace=5)
    await picker.close()
