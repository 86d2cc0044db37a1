"""No import cycles in the product or the benchmarks: no module of project, hosts, scheduling,
pools, leases, openstack, lab or bench imports, directly or through others, a module that
imports it back. Imports inside functions and under ``TYPE_CHECKING`` count too: grimp (which
import-linter builds on) reads every import statement. A cycle makes what a module means depend
on which one is imported first, and usually hides a missing extension point or a module that
holds two things."""

from __future__ import annotations

import grimp

PACKAGES = ("project", "hosts", "scheduling", "pools", "leases", "openstack", "lab", "bench")


def import_cycles(graph: grimp.ImportGraph) -> list[frozenset[str]]:
    """Every group of modules that import one another in a circle (a strongly connected
    component of two modules or more)."""
    seen: set[str] = set()
    cycles = []
    for module in sorted(graph.modules):
        if module in seen:
            continue
        # What the module imports, through any chain, that also imports it.
        circle = graph.find_upstream_modules(module) & graph.find_downstream_modules(module)
        if circle:
            cycle = frozenset({module, *circle})
            seen |= cycle
            cycles.append(cycle)
    return cycles


def one_circle(graph: grimp.ImportGraph, cycle: frozenset[str]) -> str:
    """One path around the cycle, as "a -> b -> a"."""
    first = min(cycle)
    following = min(graph.find_modules_directly_imported_by(first) & cycle)
    path = graph.find_shortest_chain(importer=following, imported=first)
    return " -> ".join((first, *path))


def test_no_module_imports_one_that_imports_it_back():
    graph = grimp.build_graph(*PACKAGES, cache_dir=None)

    found = import_cycles(graph)

    circles = sorted(one_circle(graph, cycle) for cycle in found)
    assert circles == [], "import cycles:\n" + "\n".join(circles)
