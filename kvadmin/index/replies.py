"""Redis replies as text, whether the client decodes responses or not (the ingest loop's
client does not: payloads are bytes)."""

from typing import Any


def texts(value: Any) -> Any:
    """A reply as text: bytes decoded, in dicts, sets and lists too."""
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, dict):
        return {texts(k): texts(v) for k, v in value.items()}
    if isinstance(value, set | list):
        return type(value)(texts(v) for v in value)
    return value
