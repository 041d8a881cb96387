"""The Gateway API Inference Extension endpoint picker: a gateway (Envoy and its kin) asks it
over ext_proc gRPC where each inference request goes (kvadmin/gateway/server.py)."""

READY_LINE = "endpoint picker serving on"
"""What `manage.py endpoint_picker` prints once it serves (make run waits for it)."""
