"""kvadmin's Redis index and its bookkeeping: everything that writes or inspects it.

The kthena-compatible reader stays in `scoring/`; the transport that feeds the writer (ZMQ and
pushed batches, leases, Celery wiring) lives in `ingest/`. The import rule is in
docs/architecture.md.
"""
