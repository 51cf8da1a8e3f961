"""Endpoints and socket options as the command line writes them.

An endpoint may carry CZMQ's prefix: ``@tcp://*:5555`` binds, ``>tcp://host:5555`` connects;
without one, the command's default applies (the socket commands connect unless ``--bind``,
``proxy`` binds).  ``-o NAME=VALUE`` sets any socket option by its libzmq name (``sndhwm``,
``routing_id``, ...): a value of digits as a number, or as bytes for an option that takes
bytes (``routing_id=42``); anything else as bytes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

import click

import brokerless as zmq


def split_endpoint(text: str, bind: bool) -> tuple[bool, str]:
    """``(bind?, endpoint)`` for ``text``, whose ``@``/``>`` prefix overrides ``bind``."""
    if text.startswith("@"):
        return True, text[1:]
    if text.startswith(">"):
        return False, text[1:]
    return bind, text


def attach(socket: zmq.SyncSocket, endpoints: Iterable[str], bind: bool) -> list[str]:
    """Bind or connect ``socket`` to each endpoint; returns them as ``@ep``/``>ep`` (a bound
    wildcard port shown as the port the system chose)."""
    shown = []
    for text in endpoints:
        binds, endpoint = split_endpoint(text, bind)
        try:
            if binds:
                socket.bind(endpoint)
                endpoint = socket.getsockopt(zmq.LAST_ENDPOINT).decode()
            else:
                socket.connect(endpoint)
        except zmq.ZMQError as exc:
            verb = "bind" if binds else "connect"
            raise click.ClickException(f"cannot {verb} {endpoint!r}: {exc}") from None
        shown.append(("@" if binds else ">") + endpoint)
    return shown


def set_options(socket: zmq.SyncSocket, options: Iterable[str]) -> None:
    """Apply ``NAME=VALUE`` socket options (see the module doc)."""
    for text in options:
        name, sep, raw = text.partition("=")
        option = getattr(zmq, name.strip().upper(), None)
        if not sep or not isinstance(option, int) or isinstance(option, bool):
            raise click.BadParameter(
                f"{text!r}: expected NAME=VALUE with a socket option's name (e.g. sndhwm=1000)",
                param_hint="-o/--option",
            )
        numeric = re.fullmatch(r"\s*-?\d+\s*", raw) is not None
        try:
            try:
                socket.setsockopt(option, int(raw) if numeric else raw.encode())
            except TypeError:
                if not numeric:
                    raise click.BadParameter(
                        f"{text!r}: {name.strip().upper()} takes an integer, got {raw!r}",
                        param_hint="-o/--option",
                    ) from None
                socket.setsockopt(option, raw.encode())  # digits as bytes: routing_id=42
        except (zmq.ZMQError, TypeError, ValueError, OverflowError) as exc:
            raise click.BadParameter(f"{text!r}: {exc}", param_hint="-o/--option") from None


def option_settings(help: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The ``-o NAME=VALUE`` option (repeatable), for :func:`set_options`."""
    return click.option("-o", "--option", "options", multiple=True, metavar="NAME=VALUE", help=help)


def socket_type(name: str) -> zmq.SocketType:
    """A socket type by its libzmq name, any case."""
    try:
        return zmq.SocketType[name.upper()]
    except KeyError:
        raise click.BadParameter(f"{name!r} is not a socket type") from None
