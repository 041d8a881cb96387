"""A do-nothing endpoint picker for bench/gateway.py: behind the shipped Envoy config it answers
the messages that config sends (the buffered request body, each chunk of the response body) as
kvadmin's picker does (`kvadmin.gateway.protocol`), but reads nothing, decides nothing (the
next endpoint, round robin) and records nothing. What it adds over Envoy's own
round robin is the floor of any picker written on grpcio's asyncio server behind this config:
Envoy's ext_proc filter and buffer, the gRPC streams, one Python answer per message.

Run: `python bench/processes/null_picker.py PORT ENDPOINT [ENDPOINT ...]`; it prints
`kvadmin.gateway.READY_LINE` once it serves.
"""

import asyncio
import itertools
import sys
from pathlib import Path

import grpc

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from envoy.service.ext_proc.v3 import external_processor_pb2_grpc  # noqa: E402
from grpc_health.v1 import health_pb2, health_pb2_grpc  # noqa: E402
from grpc_health.v1._async import HealthServicer  # noqa: E402

from kvadmin.gateway import READY_LINE, protocol  # noqa: E402

MAX_MESSAGE_BYTES = 16 * 1024 * 1024
"""Above the shipped Envoy's buffer (8 MiB): every body bench/gateway.py sends fits."""


class NullPicker(external_processor_pb2_grpc.ExternalProcessorServicer):
    def __init__(self, endpoints: list[str]) -> None:
        self.next_endpoint = itertools.cycle(endpoints).__next__

    async def Process(self, requests, context):  # noqa: N802 (gRPC's name)
        async for message in requests:
            if message.WhichOneof("request") == "request_body":
                yield protocol.route_to([self.next_endpoint()], None)
            else:
                yield protocol.pass_response_body()
                if message.response_body.end_of_stream:
                    return


async def serve(port: int, endpoints: list[str]) -> None:
    server = grpc.aio.server(options=[("grpc.max_receive_message_length", MAX_MESSAGE_BYTES)])
    external_processor_pb2_grpc.add_ExternalProcessorServicer_to_server(
        NullPicker(endpoints), server
    )
    health = HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health, server)
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    # Envoy's health check asks for the ext_proc service by name.
    await health.set(protocol.EXT_PROC, health_pb2.HealthCheckResponse.SERVING)
    print(f"{READY_LINE} 127.0.0.1:{port} (plaintext)", flush=True)
    await server.wait_for_termination()


if __name__ == "__main__":
    asyncio.run(serve(int(sys.argv[1]), sys.argv[2:]))
