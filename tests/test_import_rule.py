"""The import rule of docs/architecture.md: `scoring` <- `index` <- the apps <- `ingest` <-
`api`, as import-linter checks it (the contract in pyproject.toml), and no two packages of
kvadmin import each other, but for the one pair the document names."""

import itertools

import grimp
from importlinter.cli import lint_imports

ALLOWED_PAIRS = {frozenset({"kvadmin.routing", "kvadmin.weights"})}
"""Routing prices with the active weights; the what-if of /weights/ scores as routing does."""


def test_the_layers_contract_is_kept() -> None:
    assert lint_imports(no_cache=True) == 0


def test_no_two_packages_import_each_other() -> None:
    graph = grimp.build_graph("kvadmin", "scoring")
    packages = sorted(
        module
        for module in graph.find_children("kvadmin")
        if graph.find_children(module)  # packages, not the top-level modules
    )
    both_ways = [
        {a, b}
        for a, b in itertools.combinations(packages, 2)
        if graph.direct_import_exists(importer=a, imported=b, as_packages=True)
        and graph.direct_import_exists(importer=b, imported=a, as_packages=True)
        and frozenset({a, b}) not in ALLOWED_PAIRS
    ]
    assert both_ways == []
