"""Dependencies point down, in the whole of src/: no import cycle, and each layer of the
messaging core imports only what is below it (the import graph: :mod:`tests.layering`, which
counts imports inside functions and under ``TYPE_CHECKING`` too).

The core's layers, bottom up: ``constants``/``errno``/``error`` and ``runs``; the wire
(``zmtp/``, sans-I/O); ``mailbox``, ``pipe``, ``io/``; ``patterns/``; ``transport/``; ``socket/``;
the rest of the API
(``context``, ``poll``, ``proxy``, ``asyncio``, ...).  Where a lower layer calls back up it
names what it needs as a Protocol of its own (``transport/port.py``, ``pipe.py``,
``transport/engine_state.py``, ``socket/state.py``).
"""

from __future__ import annotations

import pytest

from .layering import cycles, import_graph

BASE = ("brokerless.constants", "brokerless.errno", "brokerless.error")

#: What each layer of the core may import besides itself.
ALLOWED = {
    # (_strenum: enum.StrEnum on every Python, 3.10 lacks it; it imports nothing of ours)
    "brokerless.zmtp": ("brokerless.constants", "brokerless._strenum", "brokerless.runs"),
    "brokerless.runs": (),
    "brokerless.mailbox": (),
    "brokerless.pipe": ("brokerless.mailbox", "brokerless.runs"),
    "brokerless.io": ("brokerless.mailbox",),
    "brokerless.patterns": (*BASE, "brokerless.pipe"),
    "brokerless.transport": (
        *BASE,
        "brokerless.zmtp",
        "brokerless.mailbox",
        "brokerless.pipe",
        "brokerless.io",
        "brokerless.runs",
        "brokerless.security",
    ),
    "brokerless.socket": (
        *BASE,
        "brokerless.deadline",
        "brokerless.frame",
        "brokerless.mailbox",
        "brokerless.monitor",
        "brokerless.option_attrs",
        "brokerless.option_attrs_generated",
        "brokerless.patterns",
        "brokerless.pipe",
        "brokerless.runs",
        "brokerless.security",
        "brokerless.shadow",
        "brokerless.transport",
        "brokerless.utils",
    ),
}


def _within(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def test_no_import_cycle_anywhere_in_src() -> None:
    graph = import_graph()
    found = cycles(graph)
    detail = [{m: sorted(graph[m] & set(c)) for m in c} for c in found]
    assert not found, f"import cycles (module -> what it imports in the cycle): {detail}"


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_each_layer_of_the_core_imports_only_what_is_below_it(layer: str) -> None:
    allowed = (layer, *ALLOWED[layer])
    wrong = {
        module: sorted(e for e in edges if not _within(e, allowed))
        for module, edges in import_graph().items()
        if _within(module, (layer,))
    }
    wrong = {m: e for m, e in wrong.items() if e}
    assert not wrong, f"{layer} reaches up: {wrong}"


def test_the_checker_sees_a_package_cycle_and_imports_hidden_from_the_runtime() -> None:
    """The graph counts what the layering rules are about (so the tests above can fail)."""
    graph = {"p": {"p.a"}, "p.a": {"p.b"}, "p.b": {"p"}, "q": {"p"}}
    assert cycles(graph) == [["p", "p.a", "p.b"]]
    built = import_graph()
    # testing.py imports local.py inside complete_topology(), and the package's names
    assert "brokerless.stream.local" in built["brokerless.stream.testing"]
    assert "brokerless.stream" in built["brokerless.spark.topology"]
    # engine_state.py imports the port's types under TYPE_CHECKING only
    assert "brokerless.transport.port" in built["brokerless.transport.engine_state"]
