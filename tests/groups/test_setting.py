"""KVADMIN_INDEX_GROUPS read: patterns in order, the default last, one primary per group."""

import json

import pytest

from kvadmin.index.groups import IndexGroup, InvalidIndexGroups, ambiguous_models, parse

APP = "redis://10.0.0.1:6379/0"
A = "redis://10.0.0.2:6379/0"
B = "redis://10.0.0.3:6379/0"


def groups(**patterns: str) -> str:
    return json.dumps(patterns)


def test_unset_is_one_default_group_on_redis_url() -> None:
    assert parse("", APP) == (IndexGroup("*", APP),)


def test_the_first_matching_pattern_names_the_group() -> None:
    read = parse(json.dumps({"llama-*": A, "llama-3*": B, "*": APP}), APP)
    assert next(group for group in read if group.matches("llama-3-8b")).url == A


def test_patterns_are_case_sensitive_shell_globs() -> None:
    qwen = IndexGroup("Qwen/Qwen3-?B", A)
    assert qwen.matches("Qwen/Qwen3-8B")
    assert not qwen.matches("qwen/qwen3-8b")
    assert not qwen.matches("Qwen/Qwen3-14B")
    assert IndexGroup("[!x]*", A).matches("llama")


def test_a_setting_without_the_default_group_is_refused() -> None:
    with pytest.raises(InvalidIndexGroups, match='no default group: end it with "\\*"'):
        parse(json.dumps({"llama-*": A}), APP)


def test_the_default_group_must_come_last() -> None:
    with pytest.raises(InvalidIndexGroups, match=r"must come last: \['llama-\*'\]"):
        parse(json.dumps({"*": APP, "llama-*": A}), APP)


def test_a_pattern_named_twice_is_refused() -> None:
    with pytest.raises(InvalidIndexGroups, match="names the pattern 'llama-\\*' twice"):
        parse(f'{{"llama-*": "{A}", "llama-*": "{B}", "*": "{APP}"}}', APP)


def test_two_groups_on_one_database_are_refused() -> None:
    same = "redis://10.0.0.2:6379"  # db 0 left out
    with pytest.raises(InvalidIndexGroups, match="'llama-\\*' and 'qwen-\\*' name the same"):
        parse(json.dumps({"llama-*": A, "qwen-*": same, "*": APP}), APP)


def test_a_bad_url_names_its_group() -> None:
    with pytest.raises(InvalidIndexGroups, match="group 'llama-\\*': .*scheme 'http'"):
        parse(json.dumps({"llama-*": "http://x", "*": APP}), APP)


def test_not_json_or_not_an_object_is_refused() -> None:
    with pytest.raises(InvalidIndexGroups, match="is not JSON"):
        parse("{llama: x}", APP)
    with pytest.raises(InvalidIndexGroups, match="JSON object of patterns"):
        parse('["*"]', APP)


def test_a_sentinel_url_names_a_group() -> None:
    url = "redis+sentinel://h1:26379,h2:26379/index-a/0"
    assert parse(json.dumps({"llama-*": url, "*": APP}), APP)[0] == IndexGroup("llama-*", url)


def test_a_model_two_named_patterns_match_is_ambiguous() -> None:
    read = parse(json.dumps({"llama-*": A, "*-8b": B, "*": APP}), APP)
    found = ambiguous_models(read, ["llama-3-8b", "llama-3-70b", "qwen-8b"])
    assert len(found) == 1 and "'llama-3-8b' matches ['llama-*', '*-8b']" in found[0]


def test_the_default_group_makes_no_model_ambiguous() -> None:
    read = parse(json.dumps({"llama-*": A, "*": APP}), APP)
    assert ambiguous_models(read, ["llama-3-8b", "qwen"]) == []
