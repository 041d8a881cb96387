"""The OpenAPI 3.1 document of every /api/v1/ endpoint, served at /api/v1/openapi.json.

Written next to the views it describes: the API is small and its error contract (which field,
which status) is the part clients need spelled out. The score request and the decision are
generated from their structs (kvadmin/routing/request.py, decisions.py and answer.py).
tests/routing/test_openapi_doc.py checks that every route in kvadmin/api/urls.py appears here;
add a route, describe it here.
"""

from collections.abc import Callable
from typing import Any

import msgspec
from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET

from kvadmin.api import outcomes, scoring, views
from kvadmin.api.auth import authenticate
from kvadmin.api.scopes import Scope
from kvadmin.routing import answer
from kvadmin.routing.decisions import Decision
from kvadmin.routing.outcomes import MAX_BODY_BYTES, MAX_TOKENS, MAX_TTFT_MS
from kvadmin.routing.request import ScoreRequest
from scoring.policy import POLICIES


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _error_response(description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": _ref("Error")}}}


_UNAUTHORIZED = _error_response("No valid API token (missing, unknown or revoked).")

_HAND_WRITTEN: dict[str, Any] = {
    "Error": {
        "type": "object",
        "required": ["error"],
        "properties": {
            "error": {"type": "string", "description": "What is wrong, naming the field."},
            "field": {"type": "string", "description": "The request field at fault, if any."},
            "missing_scope": {
                "type": "string",
                "description": "On 403: the grant the token lacks (`score`, `events:push=<pod>`…).",
            },
        },
    },
    "Outcome": {
        "type": "object",
        "required": ["cached_tokens", "prompt_tokens"],
        "additionalProperties": False,
        "description": "What the engine's response reported for the routed request (its "
        f"OpenAI `usage`). At most {MAX_BODY_BYTES} bytes.",
        "properties": {
            "cached_tokens": {
                "type": "integer",
                "minimum": 0,
                "maximum": MAX_TOKENS,
                "description": "usage.prompt_tokens_details.cached_tokens; at most prompt_tokens.",
            },
            "prompt_tokens": {"type": "integer", "minimum": 0, "maximum": MAX_TOKENS},
            "ttft_ms": {
                "type": "number",
                "minimum": 0,
                "maximum": MAX_TTFT_MS,
                "description": "Time to first token the gateway measured, if it did.",
            },
        },
    },
}


def _generated() -> dict[str, Any]:
    """The schemas of the score request and the decision, from the structs that decode and
    encode them (msgspec), so their types, limits and descriptions are declared once."""
    _, schemas = msgspec.json.schema_components(
        [ScoreRequest, Decision, answer.PredictedHits, answer.Delivered],
        ref_template="#/components/schemas/{name}",
    )
    schemas["Decision"] = answer.schema(schemas["Decision"])
    request = schemas["ScoreRequest"]["properties"]
    for name, field in request.items():
        # A request field that is null counts as left out: documented by its type alone.
        kinds = field.get("anyOf", [])
        if len(kinds) == 2 and {"type": "null"} in kinds:
            request[name] = next(kind for kind in kinds if kind != {"type": "null"})
    # msgspec lists a Literal's values sorted; the document keeps POLICIES' order (the default
    # first), as the knob's documentation does.
    request["policy"]["enum"] = list(POLICIES)
    return schemas


_SCHEMAS: dict[str, Any] = _HAND_WRITTEN | _generated()

_PATHS: dict[str, Any] = {
    "/api/v1/score": {
        "post": {
            "summary": "Choose a pod for one request and explain why",
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": _ref("ScoreRequest")}},
            },
            "responses": {
                "200": {
                    "description": "The decision (also recorded in the decision log).",
                    "content": {"application/json": {"schema": _ref("Decision")}},
                },
                "400": _error_response(
                    "Bad input: missing model, none or several inputs, bad or too many token "
                    "ids, unknown candidate pods, an unknown policy. `field` names the field."
                ),
                "401": _UNAUTHORIZED,
                "413": _error_response("The body is larger than the server accepts."),
                "422": _error_response("No engine serves the model."),
                "503": _error_response("Tokenization failed on every candidate, or no index."),
            },
        }
    },
    "/api/v1/decisions": {
        "get": {
            "summary": "Recent decisions, newest first",
            "parameters": [
                {
                    "name": "limit",
                    "in": "query",
                    "schema": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 50},
                },
                {"name": "model", "in": "query", "schema": {"type": "string"}},
                {
                    "name": "pod",
                    "in": "query",
                    "schema": {"type": "string"},
                    "description": "Decisions in which the pod was chosen or scored.",
                },
            ],
            "responses": {
                "200": {
                    "description": "The decisions.",
                    "content": {
                        "application/json": {
                            "schema": {
                                "type": "object",
                                "properties": {
                                    "decisions": {"type": "array", "items": _ref("Decision")}
                                },
                            }
                        }
                    },
                },
                "400": _error_response("A bad `limit`."),
                "401": _UNAUTHORIZED,
            },
        }
    },
    "/api/v1/decisions/{decision_id}/outcome": {
        "post": {
            "summary": "Report what the engine's response said for a decision's request",
            "description": "The gateway that asked for the decision (with the `score` "
            "scope it scored with) posts the engine's usage once the response arrives. Each "
            "decision takes one outcome, while the decision log keeps it. Outcomes feed the "
            "delivered-hits accounting on /metrics and the dashboard.",
            "parameters": [
                {
                    "name": "decision_id",
                    "in": "path",
                    "required": True,
                    "schema": {"type": "string"},
                    "description": "`decision_id` of the /api/v1/score answer.",
                }
            ],
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": _ref("Outcome")}},
            },
            "responses": {
                "201": {
                    "description": "Recorded: the decision's predicted vs delivered hits.",
                    "content": {
                        "application/json": {
                            "schema": {
                                "type": "object",
                                "properties": {
                                    "decision_id": {"type": "string"},
                                    "predicted": _ref("PredictedHits"),
                                    "delivered": _ref("Delivered"),
                                },
                            }
                        }
                    },
                },
                "400": _error_response(
                    "A bad body: not JSON, too large, a missing, unknown, negative, "
                    "non-integer or non-finite field."
                ),
                "401": _UNAUTHORIZED,
                "404": _error_response(
                    "No such decision in the decision log, or one another token asked for: "
                    "only the token that asked for a decision reports its outcome."
                ),
                "409": _error_response("The decision already has an outcome."),
                "422": _error_response(
                    "Counts that cannot be the decision's: prompt_tokens further from its "
                    "token count than max(64, 5%) (50% for an estimated count), or "
                    "cached_tokens above prompt_tokens or its token count. Nothing recorded."
                ),
            },
        }
    },
    "/api/v1/events/{pod}": {
        "post": {
            "summary": "Push one msgpack KV event batch of a registered engine",
            "parameters": [{"name": "pod", "in": "path", "required": True}],
            "requestBody": {
                "required": True,
                "content": {"application/msgpack": {"schema": {"type": "string"}}},
            },
            "responses": {
                "202": {
                    "description": "Accepted: applied in order by a worker. `resync` is true "
                    "when this batch's stream (the pod and the batch's rank) had no state "
                    "before it: a new engine, or the index lost its data (a Redis wipe). The "
                    "engine should then push its whole cache again: what it pushed before is "
                    "not in the index.",
                    "content": {
                        "application/json": {
                            "schema": {
                                "type": "object",
                                "required": ["accepted", "seq", "events", "skipped", "resync"],
                                "properties": {
                                    "accepted": {"type": "boolean"},
                                    "seq": {"type": "integer"},
                                    "events": {
                                        "type": "integer",
                                        "description": "Events that will be applied.",
                                    },
                                    "skipped": {
                                        "type": "object",
                                        "additionalProperties": {"type": "integer"},
                                        "description": "Events skipped, by reason "
                                        "(malformed, bad_hash, bad_medium, too_many_hashes, ...).",
                                    },
                                    "resync": {"type": "boolean"},
                                },
                            }
                        }
                    },
                },
                "400": _error_response(
                    "An undecodable batch (not msgpack, nested too deep, too many events), or "
                    "a batch rank outside the engine's data-parallel ranks [0, dp_size)."
                ),
                "401": _UNAUTHORIZED,
                "404": _error_response("No such engine."),
                "409": _error_response("The engine is disabled: its batches are not applied."),
                "413": _error_response("The batch is larger than KVADMIN_PUSH_MAX_BYTES."),
                "415": _error_response("Not application/msgpack."),
            },
        }
    },
    "/api/v1/docs": {
        "get": {
            "summary": "This document rendered as a page (Swagger UI), for a logged-in operator",
            "security": [],
            "responses": {
                "200": {"description": "HTML", "content": {"text/html": {}}},
                "302": {"description": "Not logged in: to the login page."},
            },
        }
    },
    "/api/v1/openapi.json": {
        "get": {
            "summary": "This document (an API token of any scope, or a logged-in session)",
            "responses": {"200": {"description": "OpenAPI 3.1"}, "401": _UNAUTHORIZED},
        }
    },
}

# The views behind the operations that need a token scope: each view's decorator names it.
_SCOPED_VIEWS: dict[tuple[str, str], Callable[..., Any]] = {
    ("/api/v1/score", "post"): scoring.score,
    ("/api/v1/decisions", "get"): scoring.recent_decisions,
    ("/api/v1/decisions/{decision_id}/outcome", "post"): outcomes.decision_outcome,
    ("/api/v1/events/{pod}", "post"): views.push_events,
}


def _scoped(path: str, method: str, operation: dict[str, Any]) -> dict[str, Any]:
    """`operation` with its scope's security requirement and 403, when it needs one."""
    view = _SCOPED_VIEWS.get((path, method))
    if view is None:
        return operation
    scope: Scope = view.required_scope  # type: ignore[attr-defined]
    where = ""
    if scope is Scope.EVENTS_PUSH:
        where = " for this pod (`events:push`, every pod, or `events:push=...,<pod>,...`)"
    forbidden = _error_response(
        f"The token lacks the `{scope}` scope{where}; `missing_scope` names what is missing."
    )
    return operation | {
        "security": [{"token": [scope.value]}],
        "x-required-scope": scope.value,
        "responses": operation["responses"] | {"403": forbidden},
    }


DOCUMENT: dict[str, Any] = {
    "openapi": "3.1.0",
    "info": {"title": "kvadmin API", "version": "1"},
    "components": {
        "schemas": _SCHEMAS,
        "securitySchemes": {
            "token": {
                "type": "http",
                "scheme": "bearer",
                "description": "An API token (`manage.py api_token create`). An operation "
                "that needs a scope names it in `security` and `x-required-scope`; a token "
                "without it is answered 403.",
            }
        },
    },
    "security": [{"token": []}],
    "paths": {
        path: {method: _scoped(path, method, op) for method, op in operations.items()}
        for path, operations in _PATHS.items()
    },
}


@require_GET
def docs(request: HttpRequest) -> HttpResponse:
    """The document rendered for operators (Swagger UI, vendored: static/vendor/swagger-ui)."""
    return render(request, "api/docs.html", {"document": reverse("api-openapi")})


@login_not_required
@require_GET
def openapi(request: HttpRequest) -> JsonResponse:
    if not request.user.is_authenticated and authenticate(request) is None:
        return JsonResponse({"error": "log in or send an API token"}, status=401)
    return JsonResponse(DOCUMENT)
