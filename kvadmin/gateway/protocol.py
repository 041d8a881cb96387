"""The Gateway API Inference Extension's endpoint picker protocol (its
docs/proposals/004-endpoint-picker-protocol, v1.0.0) as Envoy's ext_proc v3 messages: the
names it fixes and the answers a picker gives. Pure: no sockets, no state.

- The picked endpoints, `ip:port` comma-separated (the first, then the fallbacks), go in the
  request header and in the `envoy.lb` dynamic metadata under the same key.
- A gateway may restrict the endpoints with a subset hint: request metadata
  `envoy.lb.subset_hint`, key `x-gateway-destination-endpoint-subset`, a list of `ip:port`.
- The gateway says which endpoint served in `x-gateway-destination-endpoint-served` (here a
  response header the shipped Envoy config sets from the upstream address).

Each ext_proc message is a gRPC round trip on the gateway's request path, so the answers
that never change are built once, and an exchange has Envoy send only what it needs. A
gateway that sends the request and response headers (as GIE gateways do) is answered at
each, and stopped where the rest is not needed (`mode_override`: a path it does not route
sends nothing after its headers, a response with no decision to record sends no body). The
shipped config sends neither: what the picker reads of them comes as Envoy's attributes
with the first body message of each direction (`request.path`, `request.id`,
`request.time`; `response.code`, `upstream.address`), and Envoy writes the decision's
response header itself from the metadata the body's answer gives (`DECISION_NAMESPACE`).
"""

import time
from collections.abc import Iterable, Sequence
from datetime import datetime

import msgspec
from envoy.config.core.v3.base_pb2 import HeaderValue, HeaderValueOption
from envoy.extensions.filters.http.ext_proc.v3.processing_mode_pb2 import ProcessingMode
from envoy.service.ext_proc.v3 import external_processor_pb2
from envoy.service.ext_proc.v3.external_processor_pb2 import (
    BodyResponse,
    CommonResponse,
    HeaderMutation,
    HeadersResponse,
    HttpHeaders,
    ImmediateResponse,
    ProcessingRequest,
    ProcessingResponse,
)
from envoy.type.v3.http_status_pb2 import HttpStatus
from google.protobuf.struct_pb2 import Struct

EXT_PROC = external_processor_pb2.DESCRIPTOR.services_by_name["ExternalProcessor"].full_name
"""The ext_proc service's name, as gRPC health checks ask for it (Envoy's, in the shipped
config)."""
DESTINATION = "x-gateway-destination-endpoint"
SERVED = "x-gateway-destination-endpoint-served"
LB_NAMESPACE = "envoy.lb"
SUBSET_NAMESPACE = "envoy.lb.subset_hint"
SUBSET_KEY = "x-gateway-destination-endpoint-subset"
DECISION_HEADER = "x-kvadmin-decision"
"""kvadmin's own response header: the decision that routed the request (its log id names it
on the decision pages and in GET /api/v1/decisions)."""

DECISION_NAMESPACE = "kvadmin.picker"
"""The dynamic metadata namespace of the decision's id (key `DECISION_HEADER`), from which
the shipped Envoy config sets the response header without sending the picker the response
headers."""

_OVERWRITE = HeaderValueOption.HeaderAppendAction.OVERWRITE_IF_EXISTS_OR_ADD
_encoder = msgspec.json.Encoder()


def header_map(headers: HttpHeaders) -> dict[str, str]:
    """Lower-case names to values (Envoy sends `raw_value` bytes, older ones `value`); of a
    repeated header the last."""
    found = {}
    for header in headers.headers.headers:
        value = header.raw_value.decode("latin-1") if header.raw_value else header.value
        found[header.key.lower()] = value
    return found


def attributes(request: ProcessingRequest) -> dict[str, str]:
    """Envoy's attributes on this message (the first of each direction), as text: the
    response code as digits. Envoy keys them by the filter's name; a picker has one."""
    for fields in request.attributes.values():
        found = {}
        for name, value in fields.fields.items():
            kind = value.WhichOneof("kind")
            if kind == "string_value":
                found[name] = value.string_value
            elif kind == "number_value":
                found[name] = str(int(value.number_value))
        return found
    return {}


def seconds_ago(timestamp: str) -> float:
    """How long ago an attribute's RFC 3339 time was, never negative (another host's clock
    may run ahead); 0 for a time that does not read as one."""
    try:
        then = datetime.fromisoformat(timestamp).timestamp()
    except ValueError:
        return 0.0
    return max(time.time() - then, 0.0)


def subset_hint(request: ProcessingRequest) -> list[str] | None:
    """The subset hint's endpoints, None without one. A list, as the protocol says; a
    comma-separated text is accepted too (what a header_to_metadata filter writes)."""
    namespace = request.metadata_context.filter_metadata.get(SUBSET_NAMESPACE)
    if namespace is None or SUBSET_KEY not in namespace.fields:
        return None
    value = namespace.fields[SUBSET_KEY]
    kind = value.WhichOneof("kind")
    if kind == "list_value":
        items = [item.string_value for item in value.list_value.values]
    elif kind == "string_value":
        items = value.string_value.split(",")
    else:
        return []
    return [item.strip() for item in items if item.strip()]


def _set(headers: Iterable[tuple[str, str]]) -> HeaderMutation:
    return HeaderMutation(
        set_headers=[
            HeaderValueOption(
                header=HeaderValue(key=name, raw_value=value.encode()), append_action=_OVERWRITE
            )
            for name, value in headers
        ]
    )


def route_to(endpoints: Sequence[str], decision_id: str | None) -> ProcessingResponse:
    """The answer to the request body: the endpoints in the header and the metadata, and the
    decision's id (none for a degraded choice) in the metadata."""
    value = ",".join(endpoints)
    metadata = Struct()
    namespaces: dict = {LB_NAMESPACE: {DESTINATION: value}}
    if decision_id is not None:
        namespaces[DECISION_NAMESPACE] = {DECISION_HEADER: decision_id}
    metadata.update(namespaces)
    common = CommonResponse(header_mutation=_set([(DESTINATION, value)]))
    return ProcessingResponse(request_body=BodyResponse(response=common), dynamic_metadata=metadata)


_NOTHING_MORE = ProcessingMode(
    request_header_mode=ProcessingMode.SKIP,
    request_body_mode=ProcessingMode.NONE,
    request_trailer_mode=ProcessingMode.SKIP,
    response_header_mode=ProcessingMode.SKIP,
    response_body_mode=ProcessingMode.NONE,
    response_trailer_mode=ProcessingMode.SKIP,
)
"""The rest of the exchange goes on without the picker."""

# The constant answers, built once (gRPC only reads them).
_PASS_REQUEST_HEADERS = ProcessingResponse(request_headers=HeadersResponse())
_PASS_UNROUTED = ProcessingResponse(request_headers=HeadersResponse(), mode_override=_NOTHING_MORE)
_PASS_REQUEST_BODY = ProcessingResponse(request_body=BodyResponse())
_PASS_RESPONSE_HEADERS = ProcessingResponse(
    response_headers=HeadersResponse(), mode_override=_NOTHING_MORE
)
_PASS_RESPONSE_BODY = ProcessingResponse(response_body=BodyResponse())


def pass_request_headers(routed: bool) -> ProcessingResponse:
    """The headers unchanged; for a request the picker does not route (`routed` false),
    nothing more is sent to it: the gateway's own balancing places it."""
    return _PASS_REQUEST_HEADERS if routed else _PASS_UNROUTED


def pass_request_body() -> ProcessingResponse:
    """A chunk of a body still being buffered goes on unchanged."""
    return _PASS_REQUEST_BODY


def pass_response_headers(decision_id: str | None) -> ProcessingResponse:
    """The response's headers, with the decision's id; without a decision (a degraded
    choice) there is no outcome to record, so the body goes on without the picker."""
    if decision_id is None:
        return _PASS_RESPONSE_HEADERS
    common = CommonResponse(header_mutation=_set([(DECISION_HEADER, decision_id)]))
    return ProcessingResponse(response_headers=HeadersResponse(response=common))


def pass_response_body() -> ProcessingResponse:
    """A response chunk goes on unchanged (the picker only looks)."""
    return _PASS_RESPONSE_BODY


def refuse(status: int, message: str, kind: str) -> ProcessingResponse:
    """An immediate answer to the client, OpenAI's error shape; the request goes nowhere."""
    body = _encoder.encode({"error": {"message": message, "type": kind, "code": status}})
    return ProcessingResponse(
        immediate_response=ImmediateResponse(
            status=HttpStatus(code=status),  # type: ignore[arg-type]  (an int of the enum)
            headers=_set([("content-type", "application/json")]),
            body=body,
            details=f"kvadmin_picker_{kind}",
        )
    )
