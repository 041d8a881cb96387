"""Who asked for a decision (`Decision.requester`): the one party that may report its outcome
(`routing.outcomes.report_async`).

An API token is named by its primary key, not its name (names can be changed) nor its digest
(which stays out of the log). A caller inside kvadmin's own processes (the `score` command, the
endpoint picker) names itself with `in_process`: no API token is ever that identity, so no
token can report the outcome of a decision it did not ask for.
"""

from typing import Final

UNRECORDED: Final = ""
"""Decisions logged before requesters were recorded (`Decision.requester` absent)."""


def api_token(pk: int) -> str:
    return f"token:{pk}"


def in_process(name: str) -> str:
    return f"process:{name}"


COMMAND: Final = in_process("command")
"""Decisions of in-process callers that report no outcome (the `score` command, tests)."""
ENDPOINT_PICKER: Final = in_process("endpoint-picker")
"""The Envoy ext_proc endpoint picker, which reports the outcomes of its own decisions."""
