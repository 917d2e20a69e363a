"""The house rules of the product code (broker/, store/, protocol/), checked on the source: no
import circle between modules (counting imports inside functions and under TYPE_CHECKING, as a
drawing of the tree would), no module over 800 lines, layers that import only downwards
(protocol <- store <- broker), every module opening with a docstring, and no handler or broker
state asking whether replication exists (a single node is a cluster of one: broker/topology.py)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("protocol", "store", "broker")
MAX_LINES = 800


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            found[name.removesuffix(".__init__")] = path
    return found


MODULES = _modules()
# C extensions (setup.py builds them): leaves of the import graph, importing no product module
COMPILED = {".".join(path.relative_to(ROOT).with_suffix("").parts)
            for package in PACKAGES for path in (ROOT / package).rglob("*.c")}


def _resolve(name: str) -> str | None:
    while name and name not in MODULES and name not in COMPILED:
        name = name.rpartition(".")[0]
    return name or None


def _imports(name: str, path: Path) -> set[str]:
    """Every product module `name` imports, wherever the import statement is."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            targets = [f"{node.module}.{a.name}" for a in node.names]
        else:
            continue
        for target in targets:
            module = _resolve(target)
            if module and module != name and module not in COMPILED:
                out.add(module)
    return out


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on_stack, found, counter = {}, {}, [], set(), [], [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_no_import_circle_between_product_modules():
    graph = {name: _imports(name, path) for name, path in MODULES.items()}
    assert _circles(graph) == []


def test_layers_import_only_downwards():
    below = {"protocol": set(), "store": {"protocol"}, "broker": {"protocol", "store"}}
    wrong = [(name, target) for name, path in MODULES.items() for target in _imports(name, path)
             if target.split(".")[0] not in below[name.split(".")[0]] | {name.split(".")[0]}]
    assert wrong == []


@pytest.mark.parametrize("name", sorted(MODULES))
def test_a_module_fits_in_a_head_and_says_what_it_owns(name):
    path = MODULES[name]
    text = path.read_text()
    assert len(text.splitlines()) <= MAX_LINES
    if path.name not in ("__init__.py", "__main__.py") or text.strip():
        assert ast.get_docstring(ast.parse(text)), f"{path.relative_to(ROOT)} opens without a docstring"


def test_nothing_outside_the_topologies_asks_whether_replication_exists():
    asks = re.compile(r"\bcluster is (not )?None\b|\bbroker\.cluster\b(?!\.(node|state|zk|topics|security|shipping"
                      r"|tls|sasl|access|inter_broker)\b)")
    found = [f"{path.relative_to(ROOT)}:{i}" for name, path in MODULES.items()
             if not name.startswith("broker.cluster.") and name != "broker.topology"
             for i, line in enumerate(path.read_text().splitlines(), 1)
             if asks.search(line) and not line.lstrip().startswith(("from ", "import "))]
    assert found == []
