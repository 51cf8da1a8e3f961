"""``brokerless stream list [MODULE ...]``: the topologies a module defines (a ``Topology``, or
a streamparse ``Topology`` class, at its top level), or a package's modules, with their
components; and where ``stream run`` and ``stream list`` look for modules (the current
directory first, as ``python -m`` does)."""

from __future__ import annotations

import os
import pkgutil
import sys
from importlib import import_module
from typing import Any

import click

from brokerless.stream import sparse
from brokerless.stream.topology import Topology

_EXAMPLES = "brokerless.stream.examples"


def from_current_directory() -> None:
    """Import modules from the current directory first, as ``python -m`` does (a console
    script's sys.path starts with the script's own folder instead)."""
    here = os.getcwd()
    if here not in sys.path and "" not in sys.path:
        sys.path.insert(0, here)


@click.command(
    name="list",
    epilog="""\b
Examples:
  brokerless stream list                   # brokerless.stream.examples
  brokerless stream list mytopologies      # mytopologies.py here, or an installed module""",
)
@click.argument("modules", nargs=-1)
def list_(modules: tuple[str, ...]) -> None:
    """Show the topologies MODULES define (default: the built-in examples), as
    module:name with their components; for a package, those of its modules."""
    from_current_directory()
    for module_name in modules or (_EXAMPLES,):
        module = _import(module_name)
        found = _list_topologies(module)
        for info in sorted(pkgutil.iter_modules(getattr(module, "__path__", ()))):
            found += _list_topologies(_import(f"{module_name}.{info.name}"))
        if not found:
            click.echo(
                f"{module_name} defines no topology (a Topology, or a streamparse Topology "
                "class, at its top level)",
                err=True,
            )


def _import(module_name: str) -> Any:
    try:
        return import_module(module_name)
    except ImportError as exc:
        raise click.ClickException(f"cannot import {module_name!r}: {exc}") from None


def _list_topologies(module: Any) -> int:
    """Print the topologies ``module`` defines; how many."""
    found = 0
    for name, value in vars(module).items():
        if _dsl_class_of(value, module.__name__):  # streamparse's DSL: the class is the topology
            value = value.topology()
        if isinstance(value, Topology):
            parts = ", ".join(
                f"{c.name} ({c.kind} x{len(c.executors)})"
                for c in value.build().components.values()
                if not c.name.startswith("__")
            )
            click.echo(f"{module.__name__}:{name}\t{value.name}: {parts}")
            found += 1
    return found


def _dsl_class_of(value: Any, module_name: str) -> bool:
    """Whether ``value`` is a topology class of streamparse's DSL defined in that module."""
    return (
        isinstance(value, type)
        and issubclass(value, sparse.Topology)
        and value is not sparse.Topology
        and value.__module__ == module_name
    )
