"""How pages and exports write a computed float: rounded to a few places, trailing zeros
dropped (0.7 × 8 shows as 5.6, not 5.6000000000000005)."""

import math


def figure(value: float | None, places: int = 4) -> str:
    """`value` rounded to `places` decimals, without trailing zeros; "" for None."""
    if value is None:
        return ""
    text = f"{value:.{places}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def truncated(value: float, places: int = 2) -> str:
    """`value` cut (toward zero) to `places` decimals, after float noise is rounded away
    (27.499999999999996 is 27.5): for a ratio whose integer part is a score taken with int(),
    so the figure shown does not round up past the score (49.996 shows as 49.99)."""
    scale = 10**places
    return figure(math.trunc(round(value, 9) * scale) / scale, places)
