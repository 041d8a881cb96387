"""A score explains itself: per pod, matched blocks by medium, weighted sum and score
(compatibility.md 5.8)."""

import json

from scoring.score import PodScore, score_pods
from scoring.weights import TierWeights

WEIGHTS = TierWeights.from_config({"gpu": 1.0, "cpu": 0.5})


def scored() -> dict[str, PodScore]:
    owners = {
        1: {"a": "5|GPU", "b": "5|CPU", "c": "5"},
        2: {"a": "5|GPU", "b": "5|CPU"},
        3: {"a": "5|CPU", "b": "5|GPU"},
        4: {"a": "5|GPU"},
    }
    result = score_pods([1, 2, 3, 4, 5], owners, None, {}, WEIGHTS)
    return {pod.pod: pod for pod in result.pods}


def test_it_explains_each_pod_by_media() -> None:
    a = scored()["a"]
    assert (a.score, a.matched_blocks, a.weighted_sum) == (70, 4, 3.5)
    assert a.media == {"GPU": 3, "CPU": 1}
    assert a.media_runs == (("GPU", 2), ("CPU", 1), ("GPU", 1))


def test_blocks_without_a_medium_are_explained_as_none() -> None:
    assert scored()["c"].media == {None: 1}


def test_pods_come_best_first_then_by_name() -> None:
    owners = {1: {"b": "5", "a": "5", "c": "5"}, 2: {"c": "5"}}
    result = score_pods([1, 2], owners, None, {}, WEIGHTS)
    assert [pod.pod for pod in result.pods] == ["c", "a", "b"]
    assert (result.n_blocks, result.longest_match) == (2, 2)


def test_it_serializes_to_json() -> None:
    owners = {1: {"a": "5|GPU", "c": "5", "x": "5"}, 2: {"a": "5|GPU"}}
    result = score_pods([1, 2], owners, {"a", "c"}, {}, WEIGHTS)
    document = json.loads(json.dumps(result.to_dict()))
    assert document["pods"][0] == {
        "pod": "a",
        "score": 100,
        "matched_blocks": 2,
        "weighted_sum": 2.0,
        "media": {"GPU": 2},
        "media_runs": [["GPU", 2]],
    }
    assert document["pods"][1]["media"] == {"": 1}
    assert document["dropped_non_candidates"] == ["x"]
    assert document["timings"] is None
