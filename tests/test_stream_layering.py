"""The stream layer's and Spark's imports point down: spark -> stream -> the public messaging API
(the import graph: :mod:`tests.layering`; no cycle anywhere: tests/test_layering.py)."""

from __future__ import annotations

from .layering import import_graph

#: What the stream layer may import of brokerless outside itself: the public messaging API.
PUBLIC = (
    "brokerless",
    "brokerless.auth",
    "brokerless.auth.thread",
    "brokerless.utils",
    "brokerless.utils.z85",
    "brokerless._strenum",  # enum.StrEnum on every Python (3.10 lacks it): no messaging in it
)
#: Programs, which nothing imports: ``python -m brokerless.stream`` is the ``brokerless stream``
#: command, which lives with the other commands (``brokerless.cli``) on top of every layer.
PROGRAMS = ("brokerless.stream.__main__",)


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
