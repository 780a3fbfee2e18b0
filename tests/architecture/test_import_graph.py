"""The module import graph of ``src/tessera`` has no cycles (issue 17; docs/architecture.md).

import-linter checks that no layer reaches back *up*; this checks that no two modules reach
*each other*, inside a folder too, counting every import: those made inside functions (a lazy
import still ties the two modules together) and those under ``if TYPE_CHECKING:`` (a type that
goes both ways is a tangle too). A cycle is broken by moving the shared piece down, by passing a
function in, or by a small protocol in the lower module (as :mod:`tessera.release.view`).
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

import tessera

ROOT = Path(tessera.__file__).parent


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path, modules: set[str]) -> set[str]:
    """The modules of tessera that ``path`` imports (anywhere in the file)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # ``from a.b import c``: c is a module when a.b.c is one, else a name in a.b
            names = [f"{node.module}.{alias.name}" if f"{node.module}.{alias.name}" in modules
                     else node.module for alias in node.names]
        else:
            continue
        found.update(n for n in names if n in modules)
    return found


def import_graph() -> nx.DiGraph:
    files = {module_name(p): p for p in ROOT.rglob("*.py")}
    graph = nx.DiGraph()
    graph.add_nodes_from(files)
    for name, path in files.items():
        for target in imported_modules(path, set(files)):
            if target != name and not name.startswith(target + "."):  # a package's own parent
                graph.add_edge(name, target)
    return graph


def cycles(graph: nx.DiGraph) -> list[list[str]]:
    """Every strongly connected component with more than one module, sorted."""
    return sorted(sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1)


def test_the_module_import_graph_has_no_cycles() -> None:
    graph = import_graph()
    assert graph.number_of_nodes() > 100  # the whole package was read
    found = cycles(graph)
    assert not found, "import cycles (break each by moving the shared piece down):\n" + "\n".join(
        " <-> ".join(c) for c in found)


def test_a_planted_cycle_is_found(tmp_path: Path) -> None:
    """The check can fail: two modules importing each other are reported."""
    graph = import_graph()
    graph.add_edge("tessera.schema.domain", "tessera.schema.intervals")
    graph.add_edge("tessera.schema.intervals", "tessera.schema.domain")
    assert ["tessera.schema.domain", "tessera.schema.intervals"] in [
        [m for m in c if m in ("tessera.schema.domain", "tessera.schema.intervals")]
        for c in cycles(graph)]


def test_lazy_and_type_checking_imports_count(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from tessera.schema.domain import Domain\n"
        "def f():\n    from tessera.schema import intervals\n    import tessera.errors\n")
    modules = {"tessera.schema.domain", "tessera.schema.intervals", "tessera.errors"}
    assert imported_modules(module, modules) == modules


def test_the_package_root_holds_only_the_vocabulary() -> None:
    """Every module but the vocabulary lives in the folder of its layer (docs/architecture.md)."""
    assert sorted(p.name for p in ROOT.glob("*.py")) == ["__init__.py", "errors.py", "privacy.py",
                                                         "software.py"]
