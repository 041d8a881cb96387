"""What the weights form posts, built the way the page builds it."""

from kvadmin.weights.versions import current_version

DEFAULT_ROWS = (("gpu", "1"), ("cpu", "0.8"), ("cpu_pinned", "0.8"))
HTMX = {"HTTP_HX_REQUEST": "true"}


def weights_form(
    *rows: tuple[str, str], fallback: str = "1", reason: str = "", **extra: str
) -> dict[str, object]:
    """The draft with `rows` as (name, weight); base_version is the current version."""
    data: dict[str, object] = {
        "row": [f"k{index}" for index in range(len(rows))],
        "fallback": fallback,
        "reason": reason,
        "base_version": str(current_version().version),
        **extra,
    }
    for index, (name, weight) in enumerate(rows):
        data[f"name-k{index}"] = name
        data[f"weight-k{index}"] = weight
        data[f"note-k{index}"] = ""
    return data
