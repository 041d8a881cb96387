"""The workload is reproducible from its seed and has the shape prefix caching feeds on."""

from kvadmin.fleet.workload import Workload, WorkloadShape


def _draw(workload: Workload, n: int) -> list:
    requests = []
    for _ in range(n):
        request = workload.next_request()
        workload.record_reply(request, "a reply")
        requests.append(request)
    return requests


def test_the_same_seed_draws_the_same_requests() -> None:
    assert _draw(Workload("m", seed=3), 50) == _draw(Workload("m", seed=3), 50)
    assert _draw(Workload("m", seed=3), 50) != _draw(Workload("m", seed=4), 50)


def test_users_of_a_group_share_its_long_system_prompt() -> None:
    shape = WorkloadShape(groups=4, system_prompt_words=(250, 300))
    requests = [r for r in _draw(Workload("m", 1, shape), 200) if r.conversation is not None]
    by_group: dict[int, set[str]] = {}
    for request in requests:
        by_group.setdefault(request.group, set()).add(request.body["messages"][0]["content"])
    assert len(by_group) == 4
    assert all(len(prompts) == 1 for prompts in by_group.values())
    assert all(len(next(iter(p)).split()) >= 250 for p in by_group.values())


def test_a_conversation_grows_by_the_reply_and_a_new_question() -> None:
    workload = Workload("m", seed=2, shape=WorkloadShape(cold_fraction=0, groups=1))
    turns: dict[int, list] = {}
    for request in _draw(workload, 100):
        turns.setdefault(request.conversation, []).append(request.body["messages"])
    grown = [t for t in turns.values() if len(t) > 1]
    assert grown
    for conversation in grown:
        for before, after in zip(conversation, conversation[1:], strict=False):
            assert after[: len(before)] == before
            assert after[len(before)] == {"role": "assistant", "content": "a reply"}


def test_cold_prompts_are_plain_completions() -> None:
    requests = _draw(Workload("m", seed=5, shape=WorkloadShape(cold_fraction=1.0)), 10)
    assert {r.path for r in requests} == {"/v1/completions"}
    assert all(r.conversation is None for r in requests)
    assert requests[0].tokenize_body["add_special_tokens"] is True
