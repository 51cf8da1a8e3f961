"""Security options, and the mechanism they choose for each new connection (libzmq's rules).

Setting an option may change MECHANISM, as in libzmq: the last choice wins.  PLAIN_SERVER and
CURVE_SERVER choose PLAIN or CURVE in the server role (0 goes back to NULL); PLAIN_USERNAME and
PLAIN_PASSWORD choose a PLAIN client; any CURVE key chooses CURVE, and CURVE_SERVERKEY the client
role.  libzmq keeps one as-server flag for both mechanisms: it is stored under PLAIN_SERVER and
CURVE_SERVER alike, and reading either says whether it is set *and* that mechanism is chosen.

CURVE keys are given as 32 octets or 40 Z85 characters (41 with a final NUL, as C passes them)
and stored as the 32 octets.  METADATA takes ``X-name:value`` properties, sent in the handshake;
a name set twice keeps its first value, as libzmq's map does.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from functools import partial
from typing import Any

from .constants import SecurityMechanism, SocketOption
from .errno import EINVAL
from .error import ZMQError
from .utils import z85
from .zmtp.mechanisms import Mechanism, NullMechanism, PlainClient, PlainServer
from .zmtp.mechanisms.zap import ZapPolicy

_O = SocketOption
_M = SecurityMechanism

#: Whether CURVE can be offered (PyNaCl, a binding of libsodium, is importable).
CURVE_AVAILABLE = importlib.util.find_spec("nacl") is not None

_CURVE_KEYS = frozenset({_O.CURVE_PUBLICKEY, _O.CURVE_SECRETKEY, _O.CURVE_SERVERKEY})
#: The options this module sets (``set_option``) and reads back (``get_option``).
OPTIONS = frozenset(
    {
        _O.PLAIN_SERVER,
        _O.PLAIN_USERNAME,
        _O.PLAIN_PASSWORD,
        _O.CURVE_SERVER,
        _O.ZAP_DOMAIN,
        _O.ZAP_ENFORCE_DOMAIN,
        _O.METADATA,
        *_CURVE_KEYS,
    }
)
READ_BACK = frozenset({_O.PLAIN_SERVER, _O.CURVE_SERVER})


def _invalid(opt: SocketOption, why: str) -> ZMQError:
    return ZMQError(EINVAL, f"Invalid argument: {opt.name} {why}")


def set_option(options: dict[SocketOption, Any], opt: SocketOption, value: Any) -> None:
    """Apply a security option (its type already checked) to a socket's option table."""
    if opt in (_O.PLAIN_SERVER, _O.CURVE_SERVER):
        if value not in (0, 1):
            raise _invalid(opt, f"takes 0 or 1, not {value}")
        chosen = _M.PLAIN if opt == _O.PLAIN_SERVER else _M.CURVE
        if chosen == _M.CURVE and not CURVE_AVAILABLE:
            raise _invalid(opt, "needs CURVE, and PyNaCl is not installed")
        _set_server(options, value)
        options[_O.MECHANISM] = chosen if value else _M.NULL
    elif opt in (_O.PLAIN_USERNAME, _O.PLAIN_PASSWORD):
        if not 0 < len(value) <= 255:
            raise _invalid(opt, "must be 1 to 255 octets")
        options[opt] = value
        _set_server(options, 0)
        options[_O.MECHANISM] = _M.PLAIN
    elif opt in _CURVE_KEYS:
        if not CURVE_AVAILABLE:
            raise _invalid(opt, "needs CURVE, and PyNaCl is not installed")
        options[opt] = curve_key(opt, value)
        if opt == _O.CURVE_SERVERKEY:
            _set_server(options, 0)
        options[_O.MECHANISM] = _M.CURVE
    elif opt == _O.ZAP_DOMAIN:
        if not 0 < len(value) <= 255:
            raise _invalid(opt, "must be 1 to 255 octets")
        options[opt] = value
    elif opt == _O.ZAP_ENFORCE_DOMAIN:
        options[opt] = int(bool(value))
    elif opt == _O.METADATA:
        name, value = _property(value)
        props = dict(options[opt] or {})  # a new dict: connections keep the one they had
        props.setdefault(name, value)
        options[opt] = props
    else:
        raise AssertionError(f"{opt.name} is not a security option")


def get_option(options: dict[SocketOption, Any], opt: SocketOption) -> int:
    """PLAIN_SERVER / CURVE_SERVER as libzmq reads them back."""
    chosen = _M.PLAIN if opt == _O.PLAIN_SERVER else _M.CURVE
    return int(as_server(options) and options[_O.MECHANISM] == chosen)


def _set_server(options: dict[SocketOption, Any], value: int) -> None:
    options[_O.PLAIN_SERVER] = options[_O.CURVE_SERVER] = value


def as_server(options: Mapping[SocketOption, Any]) -> bool:
    """The greeting's as-server flag (and the role of PLAIN and CURVE)."""
    return bool(options[_O.CURVE_SERVER]) and options[_O.MECHANISM] != _M.NULL


def curve_key(opt: SocketOption, value: bytes) -> bytes:
    """A CURVE key option's 32 octets (given raw, or as 40 Z85 characters, or 41 with a NUL)."""
    if len(value) == 41 and value[40] == 0:
        value = value[:40]
    if len(value) == 40:
        try:
            return z85.decode(value)
        except ValueError:
            raise _invalid(opt, "is not valid Z85") from None
    if len(value) != 32:
        raise _invalid(opt, f"must be 32 octets or 40 Z85 characters, not {len(value)}")
    return value


def _property(value: bytes) -> tuple[str, bytes]:
    """``X-name:value`` split (name 3 to 255 characters, starting with X-; value not empty)."""
    name, sep, data = value.partition(b":")
    if not sep or len(name) <= 2 or not name.startswith(b"X-") or len(name) > 255 or not data:
        raise _invalid(_O.METADATA, 'takes "X-name:value" (a name after X-, and a value)')
    try:
        return name.decode("ascii"), data
    except UnicodeDecodeError:
        raise _invalid(_O.METADATA, "names are ASCII") from None


def mechanism(options: Mapping[SocketOption, Any]) -> Any:
    """The mechanism factory (``Connection``'s ``mechanism``) a socket's options choose."""
    chosen = options[_O.MECHANISM]
    server = as_server(options)
    domain = options[_O.ZAP_DOMAIN]
    enforce = bool(options[_O.ZAP_ENFORCE_DOMAIN])
    routing_id = options[_O.ROUTING_ID]
    if chosen == _M.PLAIN:
        if server:
            return partial(PlainServer, zap=ZapPolicy(domain, routing_id, required=True))
        return partial(
            PlainClient, username=options[_O.PLAIN_USERNAME], password=options[_O.PLAIN_PASSWORD]
        )
    if chosen == _M.CURVE:
        from .zmtp.mechanisms import curve

        secret_key = options[_O.CURVE_SECRETKEY]
        if server:
            # libzmq asks unless ZAP_ENFORCE_DOMAIN is set with no domain; goes on without a
            # handler unless ZAP_ENFORCE_DOMAIN is set.
            zap = ZapPolicy(domain, routing_id, enforce) if domain or not enforce else None
            return partial(curve.CurveServer, secret_key=secret_key, zap=zap)
        return partial(
            curve.CurveClient,
            public_key=options[_O.CURVE_PUBLICKEY],
            secret_key=secret_key,
            server_key=options[_O.CURVE_SERVERKEY],
        )
    if domain:  # NULL asks the handler when a domain is set (libzmq 4.3)
        return partial(NullMechanism, zap=ZapPolicy(domain, routing_id, enforce))
    return NullMechanism


__all__ = ["CURVE_AVAILABLE", "Mechanism", "as_server", "get_option", "mechanism", "set_option"]
