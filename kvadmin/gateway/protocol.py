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
that never change are built once, and an exchange stops the messages it does not need
(`mode_override`, which the shipped config allows): a path it does not route sends nothing
after its headers, a response with no decision to record sends no body.
"""

from collections.abc import Iterable, Sequence

import msgspec
from envoy.config.core.v3.base_pb2 import HeaderValue, HeaderValueOption
from envoy.extensions.filters.http.ext_proc.v3.processing_mode_pb2 import ProcessingMode
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

DESTINATION = "x-gateway-destination-endpoint"
SERVED = "x-gateway-destination-endpoint-served"
LB_NAMESPACE = "envoy.lb"
SUBSET_NAMESPACE = "envoy.lb.subset_hint"
SUBSET_KEY = "x-gateway-destination-endpoint-subset"
DECISION_HEADER = "x-kvadmin-decision"
"""kvadmin's own response header: the decision that routed the request (its log id names it
on the decision pages and in GET /api/v1/decisions)."""

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


def route_to(endpoints: Sequence[str]) -> ProcessingResponse:
    """The answer to the request body: the endpoints in the header and the metadata."""
    value = ",".join(endpoints)
    metadata = Struct()
    metadata.update({LB_NAMESPACE: {DESTINATION: value}})
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
