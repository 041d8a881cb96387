"""Redis replies as text, whether the client decodes responses or not (the ingest loop's
client does not: payloads are bytes)."""

from dataclasses import fields
from typing import Any

_SCALARS = {int: int, float: float, str: str, "int": int, "float": float, "str": str}


def texts(value: Any) -> Any:
    """A reply as text: bytes decoded, in dicts, sets and lists too."""
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, dict):
        return {texts(k): texts(v) for k, v in value.items()}
    if isinstance(value, set | list):
        return type(value)(texts(v) for v in value)
    return value


def from_hash[T](cls: type[T], stored: dict[str, str]) -> T:
    """A dataclass of int, float and str fields, as kept field by field in a Redis hash
    (fields the class does not have, left by another version, are ignored)."""
    kinds = {f.name: _SCALARS[f.type] for f in fields(cls)}
    return cls(**{name: kinds[name](text) for name, text in stored.items() if name in kinds})
