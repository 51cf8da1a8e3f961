"""The stream layer's and Spark's imports point down: spark -> stream -> the public messaging API.

Read from the source (every import counts: at module level, inside functions, and under
``TYPE_CHECKING``), as a graph of modules.  ``from package import name`` is an edge to the
package itself (its ``__init__`` runs and hands the name over) as well as to the submodule
``name`` when there is one, so a package whose ``__init__`` imports a module that imports the
package back is a cycle.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"
#: What the stream layer may import of brokerless outside itself: the public messaging API.
PUBLIC = (
    "brokerless",
    "brokerless.auth",
    "brokerless.auth.thread",
    "brokerless.utils",
    "brokerless.utils.z85",
)
#: Programs, which nothing imports: ``python -m brokerless.stream`` is the ``brokerless stream``
#: command, which lives with the other commands (``brokerless.cli``) on top of every layer.
PROGRAMS = ("brokerless.stream.__main__",)


def modules() -> dict[str, Path]:
    found = {}
    for path in (SRC / "brokerless").rglob("*.py"):
        parts = path.relative_to(SRC).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def import_graph() -> dict[str, set[str]]:
    """module -> the brokerless modules it imports (see the module doc)."""
    known = modules()
    graph: dict[str, set[str]] = {}
    for name, path in known.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                edges.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                edges.add(target)
                edges.update(f"{target}.{alias.name}" for alias in node.names)
        graph[name] = {e for e in edges if e in known and e != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
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

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _ours(module: str) -> bool:
    return module.startswith(("brokerless.stream", "brokerless.spark", "brokerless.cli"))


def test_no_import_cycle_in_the_stream_layer_spark_or_the_cli() -> None:
    graph = import_graph()
    found = [c for c in cycles(graph) if any(_ours(m) for m in c)]
    detail = [{m: sorted(graph[m] & set(c)) for m in c} for c in found]
    assert not found, f"import cycles (module -> what it imports in the cycle): {detail}"


def test_the_stream_layer_imports_only_itself_and_the_public_messaging_api() -> None:
    graph = import_graph()
    wrong = {
        module: sorted(
            e for e in edges if not e.startswith("brokerless.stream") and e not in PUBLIC
        )
        for module, edges in graph.items()
        if module.startswith("brokerless.stream") and module not in PROGRAMS
    }
    wrong = {m: e for m, e in wrong.items() if e}
    assert not wrong, f"the stream layer reaches up or inside: {wrong}"


def test_spark_imports_only_itself_the_stream_layer_and_the_public_messaging_api() -> None:
    graph = import_graph()
    wrong = {
        module: sorted(
            e
            for e in edges
            if not e.startswith(("brokerless.spark", "brokerless.stream")) and e not in PUBLIC
        )
        for module, edges in graph.items()
        if module.startswith("brokerless.spark")
    }
    wrong = {m: e for m, e in wrong.items() if e}
    assert not wrong, f"Spark reaches up or inside: {wrong}"


def test_the_checker_sees_a_package_cycle_and_function_level_imports() -> None:
    """The graph counts what the layering rules are about (so the tests above can fail)."""
    graph = {"p": {"p.a"}, "p.a": {"p.b"}, "p.b": {"p"}, "q": {"p"}}
    assert cycles(graph) == [["p", "p.a", "p.b"]]
    built = import_graph()
    # testing.py imports local.py inside complete_topology(), and the package's names
    assert "brokerless.stream.local" in built["brokerless.stream.testing"]
    assert "brokerless.stream" in built["brokerless.spark.topology"]
