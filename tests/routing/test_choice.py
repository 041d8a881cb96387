"""Choosing a pod: the best score wins; ties and cold requests go by rendezvous hashing of the
first block, so a prefix keeps its pod and distinct prefixes spread evenly."""

from collections import Counter

from scoring.choice import choose, rendezvous_rank, tie_break

PODS = [f"vllm-{i}.default" for i in range(4)]


def test_the_highest_score_wins_without_a_tie_break() -> None:
    assert choose({"a": 40, "b": 90, "c": 89}, ["a", "b", "c"], first_block=7) == ("b", False)


def test_identical_prefixes_land_on_the_same_pod() -> None:
    first = {choose({}, PODS, first_block=123456789)[0] for _ in range(5)}
    reordered = choose({}, list(reversed(PODS)), first_block=123456789)[0]
    assert len(first) == 1 and reordered in first


def test_distinct_cold_prefixes_spread_evenly() -> None:
    picks = Counter(choose({}, PODS, first_block=block)[0] for block in range(8000))
    assert set(picks) == set(PODS)
    assert all(1800 <= count <= 2200 for count in picks.values()), picks


def test_removing_a_pod_moves_only_its_own_prefixes() -> None:
    before = {block: choose({}, PODS, block)[0] for block in range(2000)}
    after = {block: choose({}, PODS[:-1], block)[0] for block in range(2000)}
    moved = [block for block in before if before[block] != after[block]]
    assert moved and all(before[block] == PODS[-1] for block in moved)


def test_only_the_pods_tied_at_the_top_take_part_in_the_tie_break() -> None:
    scores = {"a": 50, "b": 50, "c": 10}
    chosen, tied = choose(scores, ["a", "b", "c", "d"], first_block=99)
    assert tied and chosen == tie_break(99, ["a", "b"])


def test_a_zero_score_ties_with_candidates_that_hold_nothing() -> None:
    chosen, tied = choose({"a": 0}, ["a", "b", "c"], first_block=5)
    assert tied and chosen == tie_break(5, ["a", "b", "c"])


def test_no_candidates_means_no_choice() -> None:
    assert choose({}, [], first_block=1) == (None, False)


def test_the_rank_is_the_same_in_every_process() -> None:
    assert rendezvous_rank(0, "vllm-0.default") == 8988997107044252196
