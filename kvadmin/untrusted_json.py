"""JSON from outside (API bodies, form fields): decoded with explicit bounds, every failure one
InvalidJson with a message fit for a 400.

msgspec raises RecursionError (not DecodeError) on deeply nested input and UnicodeDecodeError
on invalid UTF-8 inside a string; both are the client's fault, not a 500. Nothing kvadmin
accepts nests deeper than MAX_DEPTH (chat messages with content parts: 5).
"""

from typing import Any

import msgspec

MAX_DEPTH = 16


class InvalidJson(ValueError):
    pass


def decode_json(raw: bytes | str) -> Any:
    try:
        value = msgspec.json.decode(raw)
    except RecursionError:
        raise InvalidJson(f"JSON nested deeper than {MAX_DEPTH} levels") from None
    except UnicodeDecodeError as error:
        raise InvalidJson(f"not UTF-8 text: {error.reason} at byte {error.start}") from None
    except msgspec.DecodeError as error:
        raise InvalidJson(str(error)) from None
    if _depth_over(value, MAX_DEPTH):
        raise InvalidJson(f"JSON nested deeper than {MAX_DEPTH} levels")
    return value


def _depth_over(value: Any, limit: int) -> bool:
    """Iterative, so the check itself cannot hit the recursion limit."""
    pending = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        pending.extend((child, depth + 1) for child in children)
    return False
