"""The posted form becomes a configuration, or errors pinned to the row that caused them."""

from kvadmin.weights.config import WeightConfig
from kvadmin.weights.draft import Draft, parse_draft


def form(*rows: tuple[str, str], fallback: str = "1", **extra: str) -> dict[str, list[str]]:
    data: dict[str, list[str]] = {"row": [], "fallback": [fallback], "base_version": ["1"]}
    for index, (name, weight) in enumerate(rows):
        data["row"].append(f"r{index}")
        data[f"name-r{index}"] = [name]
        data[f"weight-r{index}"] = [weight]
    for key, value in extra.items():
        data[key] = [value]
    return data


def errors_by_row(draft: Draft) -> dict[str, list[str]]:
    return {row.key: row.errors for row in draft.rows if row.errors}


def test_a_valid_form_gives_its_config() -> None:
    draft = parse_draft(form(("gpu", "1"), ("DISK", " 0.25 "), fallback="0.9"))
    assert draft.config is not None
    assert dict(draft.config.weights) == {"disk": 0.25, "gpu": 1.0}
    assert draft.config.fallback == 0.9
    assert draft.base_version == 1


def test_it_pins_a_weight_above_one_to_its_row() -> None:
    draft = parse_draft(form(("gpu", "1"), ("cpu", "1.5")))
    assert draft.config is None
    assert errors_by_row(draft) == {"r1": ["must be between 0 and 1, got 1.5"]}


def test_nan_text_is_rejected_by_the_weight_rules() -> None:
    draft = parse_draft(form(("cpu", "nan")))
    assert errors_by_row(draft) == {"r0": ["must be a number between 0 and 1, got NaN"]}


def test_words_are_not_numbers() -> None:
    draft = parse_draft(form(("cpu", "lots")))
    assert errors_by_row(draft) == {"r0": ["must be a number between 0 and 1, got 'lots'"]}


def test_both_rows_of_a_duplicate_differing_in_case_are_marked() -> None:
    draft = parse_draft(form(("disk", "0.5"), ("DISK", "0.4")))
    errors = errors_by_row(draft)
    assert set(errors) == {"r0", "r1"}
    assert "the same medium as 'DISK'" in errors["r0"][0]


def test_exact_duplicates_are_marked_too() -> None:
    draft = parse_draft(form(("disk", "0.5"), ("disk", "0.4")))
    assert errors_by_row(draft) == {"r0": ["listed twice"], "r1": ["listed twice"]}


def test_a_weight_without_a_name_is_an_error() -> None:
    draft = parse_draft(form(("  ", "0.5")))
    assert errors_by_row(draft) == {"r0": ["the name is empty"]}


def test_an_untouched_added_row_is_ignored() -> None:
    draft = parse_draft(form(("gpu", "1"), ("", "")))
    assert draft.config is not None and dict(draft.config.weights) == {"gpu": 1.0}


def test_removed_rows_are_left_out_even_when_invalid() -> None:
    draft = parse_draft(form(("gpu", "1"), ("cpu", "9"), **{"remove-r1": "1"}))
    assert draft.config is not None and dict(draft.config.weights) == {"gpu": 1.0}


def test_a_bad_fallback_is_pinned_to_the_fallback() -> None:
    draft = parse_draft(form(("gpu", "1"), fallback="-0.1"))
    assert draft.fallback_errors == ["must be between 0 and 1, got -0.1"]
    assert not errors_by_row(draft)


def test_a_medium_named_fallback_is_not_confused_with_the_fallback() -> None:
    draft = parse_draft(form(("fallback", "2"), fallback="0.5"))
    assert errors_by_row(draft) == {"r0": ["must be between 0 and 1, got 2.0"]}
    assert draft.fallback_errors == []


def test_every_bad_row_is_reported_at_once() -> None:
    draft = parse_draft(form(("gpu", "1.5"), ("cpu", "-0.1"), ("", "0.3")))
    assert set(errors_by_row(draft)) == {"r0", "r1", "r2"}


def test_an_untouched_form_keeps_every_weight_exactly() -> None:
    config = WeightConfig.validated({"disk": 0.123456789, "gpu": 1.0, "fs": 1e-7}, 0.3)
    draft = Draft.from_config(config, 5)
    rows = [(row.name, row.weight) for row in draft.rows]
    assert rows == [("disk", "0.123456789"), ("fs", "1e-07"), ("gpu", "1")]
    data = {"row": [row.key for row in draft.rows], "fallback": [draft.fallback]}
    for row in draft.rows:
        data[f"name-{row.key}"], data[f"weight-{row.key}"] = [row.name], [row.weight]
    assert parse_draft(data).config == config
