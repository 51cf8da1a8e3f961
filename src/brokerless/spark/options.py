"""Reading the string options of ``format("brokerless")`` with errors that say what to do."""

from __future__ import annotations

from collections.abc import Mapping
from typing import overload

__all__ = ["OptionError", "boolean", "check_known", "choice", "endpoints", "positive_int"]

_SCHEMES = ("tcp://", "ipc://")


class OptionError(ValueError):
    """A missing or invalid ``format("brokerless")`` option; the message names it."""


def check_known(
    options: Mapping[str, str], known: tuple[str, ...], what: str, also: tuple[str, ...] = ()
) -> None:
    """Reject options this side does not read (a misspelt option must not pass unnoticed).

    ``also`` names options Spark itself adds, accepted and not listed in the error.
    """
    lowered = {name.lower() for name in known + also}
    for name in options:
        if name.lower() not in lowered:
            raise OptionError(
                f"brokerless {what}: unknown option {name!r}; the options are {', '.join(known)}"
            )


def endpoints(options: Mapping[str, str], name: str, what: str, bind: bool) -> tuple[str, ...]:
    """A required comma-separated list of tcp:// or ipc:// endpoints (to bind: each with the
    port to bind, not one the system picks)."""
    raw = options.get(name)
    if not raw or not raw.strip():
        raise OptionError(
            f'brokerless {what}: option "{name}" is required: the endpoints to connect or bind, '
            'comma-separated, e.g. .option("' + name + '", "tcp://127.0.0.1:5555")'
        )
    found = tuple(part.strip() for part in raw.split(",") if part.strip())
    for endpoint in found:
        if not endpoint.startswith(_SCHEMES):
            raise OptionError(
                f'brokerless {what}: option "{name}": {endpoint!r} is not a tcp:// or ipc:// '
                "endpoint (inproc:// cannot work: Spark runs sources and sinks in other processes)"
            )
        if bind and endpoint.startswith("tcp://") and endpoint.rpartition(":")[2] in ("*", "0"):
            raise OptionError(
                f'brokerless {what}: option "{name}": {endpoint!r} would bind a port the system '
                "picks, which no peer could learn (and each run or task would get another); give "
                'the port to bind, e.g. "tcp://0.0.0.0:5555"'
            )
    return found


def choice(options: Mapping[str, str], name: str, choices: tuple[str, ...], what: str) -> str:
    """One of ``choices`` (case-insensitive); the first is the default."""
    raw = options.get(name)
    if raw is None:
        return choices[0]
    value = raw.strip().upper()
    if value not in choices:
        raise OptionError(
            f'brokerless {what}: option "{name}" must be one of {", ".join(choices)}, not {raw!r}'
        )
    return value


def boolean(options: Mapping[str, str], name: str, default: bool, what: str) -> bool:
    raw = options.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value not in ("true", "false"):
        raise OptionError(f'brokerless {what}: option "{name}" must be true or false, not {raw!r}')
    return value == "true"


@overload
def positive_int(options: Mapping[str, str], name: str, default: int, what: str) -> int: ...
@overload
def positive_int(options: Mapping[str, str], name: str, default: None, what: str) -> int | None: ...
def positive_int(
    options: Mapping[str, str], name: str, default: int | None, what: str
) -> int | None:
    """A positive integer option, or ``default`` when it is not given."""
    raw = options.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value <= 0:
        raise OptionError(
            f'brokerless {what}: option "{name}" must be a positive integer, not {raw!r}'
        )
    return value
