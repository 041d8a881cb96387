"""What a live seq means, given what was applied and what the socket delivered before."""

import pytest

from kvadmin.ingest.streams import SeqAction, classify_seq


@pytest.mark.parametrize(
    ("seq", "last_applied", "last_live", "action"),
    [
        (0, -1, -1, SeqAction.APPLY),
        (5, 4, 4, SeqAction.APPLY),
        (7, 4, 4, SeqAction.GAP),
        (3, 4, -1, SeqAction.DUPLICATE),  # delivered live after replay already applied it
        (4, 4, 3, SeqAction.DUPLICATE),
        (0, 9, 9, SeqAction.RESTART),  # the publisher's seq fell back
        (2, 9, 9, SeqAction.RESTART),
        (12, 9, 11, SeqAction.GAP),
    ],
)
def test_it_classifies_each_seq(seq: int, last_applied: int, last_live: int, action) -> None:
    assert classify_seq(seq, last_applied, last_live) is action
