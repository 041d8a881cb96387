"""The index groups checked against the registered models (`kvadmin.index.groups`): a process
that must not run on a misconfigured index stops at start with every problem named, and
`manage.py check` names them too:

- the setting (it reads, no registered model is ambiguous) with the database checks, which
  `migrate` runs (`make run` runs it first) and `check --database default`;
- the groups' servers (each answers, is a primary, is no cluster node) with `check --deploy`:
  a migration job may not reach Redis, and `make run` migrates before it starts Redis.
"""

from typing import Any

from django.core.checks import CheckMessage, Error, Tags, register
from django.db import DatabaseError

from kvadmin.engines.models import Engine
from kvadmin.index.groups import primary_problems, setting_problems, startup_problems


def _models() -> list[str]:
    """The registered models; none before the first migration made the engines' table (the
    first `migrate` of a new install runs this check too)."""
    try:
        return list(Engine.objects.values_list("model", flat=True).distinct())
    except DatabaseError:
        return []


def require_ready(who: str) -> None:
    """Exit naming every problem, for a process that must not run on a broken index."""
    if problems := startup_problems(_models()):
        raise SystemExit("\n".join(f"{who}: {problem}" for problem in problems))


@register(Tags.database)
def check_index_groups_setting(
    app_configs: Any, databases: Any = None, **kwargs: Any
) -> list[CheckMessage]:
    if not databases:
        return []
    return [Error(problem, id="kvadmin.E010") for problem in setting_problems(_models())]


@register(deploy=True)
def check_index_groups_servers(app_configs: Any, **kwargs: Any) -> list[CheckMessage]:
    return [Error(problem, id="kvadmin.E011") for problem in primary_problems()]
