"""The package's layers: every import in sap/ points down the table below, no two modules import each other
(directly or round a longer cycle), and no private name (`_x`) is imported from another module.

Every import statement counts, at module level or inside a function (a lazy import is still a dependency).
The package root `sap/__init__.py` is the public facade above all layers: it resolves its names lazily and
imports only `sap.version` and `sap.lazy` when loaded."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

SAP = Path(__file__).resolve().parent.parent / "sap"

# the cache's core (keys, index, rules, the cache executor, the recorder, the store, recorded mode) sits beside the
# toolsets, below the rest of the cache package (templates, sampling, collection, queries: over agents and the LLM),
# so an MCP toolset in recorded mode can put its executors behind a cache
CACHE_CORE = tuple(f"sap.cache.{m}" for m in ("keys", "index", "rules", "executor", "recorder", "store", "readthrough"))
# layer number -> modules or packages (a package stands for every module in it); 1 is the top
LAYERS: dict[int, tuple[str, ...]] = {
    1: ("sap.cli",),
    2: ("sap.api", "sap.curriculum", "sap.envs"),
    3: ("sap.runs", "sap.eval", "sap.validate"),
    4: ("sap.graphs",),
    5: ("sap.cache",),
    6: ("sap.agents",),
    7: ("sap.fsm", "sap.export", "sap.rewards", "sap.report", "sap.audit"),
    8: ("sap.provenance", "sap.toolsets", "sap.testing", *CACHE_CORE),
    9: ("sap.store", "sap.text", "sap.executors"),
    10: ("sap.llm", "sap.prompts", "sap.model", "sap.jsonutil", "sap.version", "sap.errors", "sap.drops",
         "sap.lazy", "sap.alternation"),
}


def module_name(path: Path) -> str:
    """`sap/graphs/rewrite.py` -> `sap.graphs.rewrite`; a package's `__init__.py` -> the package."""
    parts = path.relative_to(SAP.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in SAP.rglob("*.py")}


def layer_of(module: str) -> int | None:
    """The layer of a module: that of the longest table entry it is or lies under (None for the root)."""
    best = None
    for number, names in LAYERS.items():
        for name in names:
            if (module == name or module.startswith(name + ".")) and (best is None or len(name) > len(best[1])):
                best = (number, name)
    return best[0] if best else None


def resolve(name: str) -> str:
    """The sap module an import names: the module itself, or the nearest enclosing package or module."""
    while name not in MODULES and "." in name:
        name = name.rsplit(".", 1)[0]
    return name


def imports(module: str) -> list[tuple[str, str, int]]:
    """(imported module, imported name or "", line) for every import of a sap module in `module`."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(resolve(a.name), "", node.lineno) for a in node.names if a.name.split(".")[0] == "sap"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            if source.split(".")[0] != "sap":
                continue
            for alias in node.names:
                target = f"{source}.{alias.name}"
                found.append((target if target in MODULES else resolve(source),
                              "" if target in MODULES else alias.name, node.lineno))
    return found


EDGES = {module: imports(module) for module in MODULES}


def test_every_module_has_a_layer() -> None:
    unplaced = sorted(m for m in MODULES if m != "sap" and layer_of(m) is None)
    assert not unplaced, f"modules in no layer of LAYERS: {unplaced}"


def test_no_import_points_up() -> None:
    upward = []
    for module, edges in EDGES.items():
        if module == "sap":
            continue
        for target, name, line in edges:
            if target == "sap" or layer_of(target) < layer_of(module):
                upward.append(f"{MODULES[module].relative_to(SAP.parent)}:{line}: {module} (layer "
                              f"{layer_of(module)}) imports {target}{'.' + name if name else ''} (layer "
                              f"{layer_of(target) if target != 'sap' else 'root'})")
    assert not upward, "imports that point up a layer:\n" + "\n".join(upward)


def test_root_imports_only_the_version() -> None:
    assert {target for target, _, _ in EDGES["sap"]} == {"sap.version", "sap.lazy"}


def test_no_private_name_crosses_modules() -> None:
    private = [f"{MODULES[module].relative_to(SAP.parent)}:{line}: {module} imports {name} from {target}"
               for module, edges in EDGES.items() for target, name, line in edges
               if name.startswith("_") and not name.startswith("__") and target != module]
    assert not private, "private names imported across modules:\n" + "\n".join(private)


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of `graph` as a list of nodes (first == last), or None if it has none."""
    state: dict[str, int] = {}  # 1 on the current path, 2 done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (cycle := visit(start)):
            return cycle
    return None


def test_no_import_cycle() -> None:
    graph = {module: {t for t, _, _ in edges if t != module} for module, edges in EDGES.items()}
    cycle = find_cycle(graph)
    assert cycle is None, "modules that import each other: " + " -> ".join(cycle)


@pytest.mark.parametrize("graph, cyclic", [({"a": {"b"}, "b": {"c"}, "c": {"a"}}, True),
                                           ({"a": {"b", "c"}, "b": {"c"}, "c": set()}, False)])
def test_cycle_finder_finds_cycles(graph: dict[str, set[str]], cyclic: bool) -> None:
    assert (find_cycle(graph) is not None) == cyclic


def test_layer_of_takes_the_longest_entry() -> None:
    assert layer_of("sap.cli.main") == 1 and layer_of("sap.text") == 9 and layer_of("sap.textual") is None
