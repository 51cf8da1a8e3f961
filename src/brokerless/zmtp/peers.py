"""Which socket types may talk to which (RFC 37), and what older peers announce (RFC 15)."""

from __future__ import annotations

from ..constants import SocketType
from .errors import InvalidMetadata

_T = SocketType
#: Which socket types may talk to which (RFC 37).
VALID_PEERS: dict[SocketType, frozenset[SocketType]] = {
    _T.REQ: frozenset({_T.REP, _T.ROUTER}),
    _T.REP: frozenset({_T.REQ, _T.DEALER}),
    _T.DEALER: frozenset({_T.REP, _T.DEALER, _T.ROUTER}),
    _T.ROUTER: frozenset({_T.REQ, _T.DEALER, _T.ROUTER}),
    _T.PUB: frozenset({_T.SUB, _T.XSUB}),
    _T.XPUB: frozenset({_T.SUB, _T.XSUB}),
    _T.SUB: frozenset({_T.PUB, _T.XPUB}),
    _T.XSUB: frozenset({_T.PUB, _T.XPUB}),
    _T.PUSH: frozenset({_T.PULL}),
    _T.PULL: frozenset({_T.PUSH}),
    _T.PAIR: frozenset({_T.PAIR}),
}


def legacy_socket_type(number: int) -> SocketType:
    """The socket type a ZMTP 2.0 greeting announces: RFC 15's numbers, which are libzmq's (an
    XPUB or XSUB sends its own, 9 or 10)."""
    if number not in VALID_PEERS:
        raise InvalidMetadata(f"peer announced an unknown socket type {number}")
    return SocketType(number)
