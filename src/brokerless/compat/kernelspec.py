"""Install a Jupyter kernelspec whose IPython kernel runs on brokerless.

    python -m brokerless.compat.kernelspec [--user | --sys-prefix | --prefix PREFIX]
                                           [--name NAME] [--display-name TEXT]

writes ipykernel's own kernelspec (its logos, its metadata: debugger, CurveZMQ transport
encryption) with the command line changed to start the kernel through the ``zmq`` alias::

    python -Xfrozen_modules=off -m brokerless.compat.as_zmq --no-inherit
           -m ipykernel_launcher -f {connection_file}

so every Jupyter front end (notebook, lab, console, nbclient) lists it as NAME (default
``python3-brokerless``) and its kernel's ``zmq`` is brokerless. ``--no-inherit`` keeps the alias
to the kernel itself: programs a notebook starts (``!python ...``, ``subprocess``) get the
environment they would get under any other kernel. Needs ipykernel and jupyter_client (the
``jupyter`` extra).
"""

from __future__ import annotations

import argparse
import platform
import sys
import tempfile
from pathlib import Path

KERNEL_NAME = "python3-brokerless"
DISPLAY_NAME = "Python 3 (brokerless)"


def kernel_argv(executable: str | None = None) -> list[str]:
    """The kernel's command line, as kernel.json stores it (``{connection_file}`` is filled in
    by the front end)."""
    # As `python -m ipykernel install`: debugpy misses breakpoints in frozen modules.
    frozen = ["-Xfrozen_modules=off"] if platform.python_implementation() == "CPython" else []
    return [
        executable or sys.executable,
        *frozen,
        *("-m", "brokerless.compat.as_zmq", "--no-inherit"),
        *("-m", "ipykernel_launcher", "-f", "{connection_file}"),
    ]


def install(
    *,
    user: bool = False,
    prefix: str | None = None,
    kernel_name: str = KERNEL_NAME,
    display_name: str = DISPLAY_NAME,
) -> str:
    """Install the kernelspec (system-wide unless ``user`` or ``prefix``); returns where."""
    try:
        from ipykernel.kernelspec import write_kernel_spec
        from jupyter_client.kernelspec import KernelSpecManager
    except ImportError as exc:
        raise ImportError(
            f"installing a kernelspec needs ipykernel and jupyter_client ({exc.name} is "
            "missing): install the jupyter extra (in a brokerless clone: "
            "pip install -e '.[jupyter]')",
            name=exc.name,
        ) from exc

    with tempfile.TemporaryDirectory(suffix="_kernels") as staging:
        source = write_kernel_spec(
            Path(staging) / kernel_name,
            overrides={"argv": kernel_argv(), "display_name": display_name},
        )
        return KernelSpecManager().install_kernel_spec(
            source, kernel_name=kernel_name, user=user, prefix=prefix
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m brokerless.compat.kernelspec",
        description="Install a Jupyter kernelspec whose IPython kernel runs on brokerless.",
    )
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--user", action="store_true", help="install for the current user")
    where.add_argument("--prefix", help="install under PREFIX/share/jupyter/kernels")
    where.add_argument(
        "--sys-prefix",
        action="store_const",
        const=sys.prefix,
        dest="prefix",
        help="install into this Python's prefix (a virtualenv's or conda env's)",
    )
    parser.add_argument("--name", default=KERNEL_NAME, help=f"kernel name (default {KERNEL_NAME})")
    parser.add_argument(
        "--display-name", default=DISPLAY_NAME, help=f"name shown (default {DISPLAY_NAME!r})"
    )
    args = parser.parse_args(argv)
    dest = install(
        user=args.user, prefix=args.prefix, kernel_name=args.name, display_name=args.display_name
    )
    print(f"Installed kernelspec {args.name} in {dest}")


if __name__ == "__main__":
    main()
