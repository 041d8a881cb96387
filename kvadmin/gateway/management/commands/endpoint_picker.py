"""`manage.py endpoint_picker --host H --port P`: the Gateway API Inference Extension endpoint
picker (Envoy ext_proc gRPC), kvadmin/gateway/server.py."""

import asyncio
from argparse import ArgumentParser
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from kvadmin.gateway.server import Tls, serve


class Command(BaseCommand):
    help = "Serve the endpoint picker a gateway (Envoy ext_proc) asks for each request's pod."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--host", default="127.0.0.1", help="address to bind (no auth!)")
        parser.add_argument("--port", type=int, default=9002, help="gRPC port (0: any free)")
        parser.add_argument("--metrics-port", type=int, help="Prometheus counters' port")
        parser.add_argument("--tls-cert", type=Path, help="PEM server certificate (TLS)")
        parser.add_argument("--tls-key", type=Path, help="PEM private key of --tls-cert")
        parser.add_argument("--tls-client-ca", type=Path, help="PEM CA clients must present")

    def handle(self, *args, **options) -> None:
        cert, key, ca = options["tls_cert"], options["tls_key"], options["tls_client_ca"]
        if (cert is None) != (key is None) or (ca is not None and cert is None):
            raise CommandError(
                "--tls-cert and --tls-key go together (and --tls-client-ca needs them)"
            )
        tls = Tls(cert, key, ca) if cert is not None and key is not None else None
        asyncio.run(serve(options["host"], options["port"], options["metrics_port"], tls))
