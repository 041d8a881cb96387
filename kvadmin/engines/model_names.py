"""The one rule for a served model name, wherever one enters: the engine registry (model field,
admin, `engines add`), the scoring API and `manage.py score`, the explain form.

A model name is stored in index keys and shown on every page, so it must be printable text of
bounded length: no control characters (a newline once broke /blocks/ for good), no separators
or other invisible characters, at most MAX_LENGTH characters.
"""

import unicodedata

from django.core.exceptions import ValidationError

MAX_LENGTH = 255  # also the registry column's width
# Unicode categories refused: controls, format characters, surrogates, unassigned, private use,
# line and paragraph separators. Plain spaces are fine inside a name, not at its ends.
_REFUSED = {"Cc", "Cf", "Cs", "Cn", "Co", "Zl", "Zp"}


def model_name_problem(name: object) -> str | None:
    """Why `name` is not a model name, or None when it is one."""
    if not isinstance(name, str) or not name.strip():
        return "a model name is required"
    if len(name) > MAX_LENGTH:
        return f"a model name is at most {MAX_LENGTH} characters (this one has {len(name)})"
    if name != name.strip():
        return "a model name has no leading or trailing spaces"
    for char in name:
        if unicodedata.category(char) in _REFUSED or (char.isspace() and char != " "):
            return f"a model name has no control or invisible characters (found U+{ord(char):04X})"
    return None


def validate_model_name(name: str) -> None:
    """Django validator (model field, forms) for the same rule."""
    if problem := model_name_problem(name):
        raise ValidationError(problem, code="invalid_model_name")
