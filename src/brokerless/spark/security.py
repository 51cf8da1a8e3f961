"""The source's and the sink's security options: CURVE or PLAIN towards peers outside Spark.

Theory of operation
-------------------
``format("brokerless")`` takes the libzmq socket options by their camel-case names, checked
when the query starts (:meth:`PeerSecurity.from_options`) with errors that say what to give:

- CURVE client: ``curveServerKey`` (the server's public key) and ``curveSecretKey`` (this
  side's; ``curvePublicKey`` may be given too and must belong to it).
- CURVE server: ``curveServer=true`` and ``curveSecretKey`` (``curvePublicKey`` optional, as
  above).  As in libzmq with no ZAP handler, any client that knows the server's public key
  gets in: the traffic is encrypted and the server proven, the client is not checked.
- PLAIN client: ``plainUsername`` and ``plainPassword``.
- PLAIN server: ``plainServer=true`` with ``plainUsername`` and ``plainPassword``: a ZAP
  handler in the socket's own context admits exactly that user (PLAIN sends the password in
  clear: use it on a trusted network, or CURVE).
- ``zapDomain``: the server socket's ZAP_DOMAIN (the PLAIN server's handler answers for it).

Keys are 40 Z85 characters (``zmq.curve_keypair()`` makes them).  The options go on the
socket before it binds or connects (:meth:`PeerSecurity.apply`), whatever its type (the
source's SUB, PULL or acknowledging ROUTER, the sink's PUSH or XPUB); the ZAP handler it may
start is stopped after the socket closes and before its context ends.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field

import brokerless as zmq
from brokerless.auth.thread import ThreadAuthenticator
from brokerless.utils import z85

from .options import OptionError, boolean

__all__ = ["OPTIONS", "PeerSecurity"]

#: The option names (``check_known`` lists them with the source's and sink's own).
OPTIONS = (
    "curveServer",
    "curveServerKey",
    "curvePublicKey",
    "curveSecretKey",
    "plainServer",
    "plainUsername",
    "plainPassword",
    "zapDomain",
)
_DEFAULT_DOMAIN = "global"


@dataclass(frozen=True)
class PeerSecurity:
    """A socket's security options, checked.  ``mechanism``: NULL, PLAIN or CURVE; keys are
    32 octets; the secrets never show in a repr.  The options, the source's and the sink's:

    - ``curveServer``: ``true`` to be a CURVE server (with ``curveSecretKey``): the traffic is
      encrypted and this side proven; any client that knows its public key gets in (default
      ``false``).
    - ``curveServerKey``: the CURVE server's public key (40 Z85 characters), to be a CURVE client
      (with ``curveSecretKey``).
    - ``curvePublicKey``: this side's CURVE public key; optional, and checked against
      ``curveSecretKey``.
    - ``curveSecretKey``: this side's CURVE secret key, for a CURVE server or client
      (``zmq.curve_keypair()`` makes a pair).
    - ``plainServer``: ``true`` to be a PLAIN server that admits exactly ``plainUsername`` with
      ``plainPassword`` (PLAIN sends the password in clear: a trusted network only; default
      ``false``).
    - ``plainUsername``: the PLAIN user name: a PLAIN client's, or the one a PLAIN server admits.
    - ``plainPassword``: the PLAIN password, with ``plainUsername``.
    - ``zapDomain``: the ZAP domain of a server source or sink (ZeroMQ's ZAP_DOMAIN).
    """

    mechanism: str = "NULL"
    server: bool = False
    public_key: bytes | None = None
    secret_key: bytes | None = field(default=None, repr=False)
    server_key: bytes | None = None
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    zap_domain: str | None = None

    @classmethod
    def from_options(cls, options: Mapping[str, str], what: str) -> PeerSecurity:
        """The security ``options`` ask for (see the module doc); OptionError when they are
        incomplete, contradictory, or a key is not a key."""
        lowered = {name.lower(): value for name, value in options.items()}
        given = {name: lowered[name.lower()] for name in OPTIONS if name.lower() in lowered}
        curve = any(name.startswith("curve") for name in given)
        plain = any(name.startswith("plain") for name in given)
        if curve and plain:
            raise OptionError(
                f"brokerless {what}: curve* and plain* options do not mix: choose CURVE or PLAIN"
            )
        domain = given.get("zapDomain")
        if curve:
            found = cls._curve(given, what)
        elif plain:
            found = cls._plain(given, what)
        else:
            found = cls()
        if domain is not None:
            if not found.server:
                raise OptionError(
                    f'brokerless {what}: option "zapDomain" applies to a server '
                    "(curveServer=true or plainServer=true)"
                )
            if not 0 < len(domain.encode()) <= 255:
                raise OptionError(f'brokerless {what}: option "zapDomain" must be 1 to 255 bytes')
        if found.mechanism == "PLAIN" and found.server:
            domain = domain or _DEFAULT_DOMAIN
        return dataclasses.replace(found, zap_domain=domain)

    @classmethod
    def _curve(cls, given: Mapping[str, str], what: str) -> PeerSecurity:
        server = boolean(given, "curveServer", False, what)
        server_key = _key(given, "curveServerKey", what)
        if server and server_key is not None:
            raise OptionError(
                f'brokerless {what}: "curveServer=true" and "curveServerKey" contradict each '
                "other: a server has no server key (give curveServerKey to be a client)"
            )
        if not server and server_key is None:
            raise OptionError(
                f'brokerless {what}: CURVE needs "curveServerKey" (the server\'s public key, '
                'to be its client) or "curveServer=true" (to be the server)'
            )
        secret = _key(given, "curveSecretKey", what)
        if secret is None:
            raise OptionError(
                f'brokerless {what}: CURVE needs "curveSecretKey", this side\'s secret key '
                "(40 Z85 characters: zmq.curve_keypair() makes a pair)"
            )
        public = z85.decode(zmq.curve_public(z85.encode(secret)))
        stated = _key(given, "curvePublicKey", what)
        if stated is not None and stated != public:
            raise OptionError(
                f'brokerless {what}: "curvePublicKey" is not the public key of "curveSecretKey"'
            )
        return cls("CURVE", server, public, secret, server_key)

    @classmethod
    def _plain(cls, given: Mapping[str, str], what: str) -> PeerSecurity:
        server = boolean(given, "plainServer", False, what)
        username, password = given.get("plainUsername"), given.get("plainPassword")
        if username is None or password is None:
            role = "the user it admits" if server else "its credentials"
            raise OptionError(
                f'brokerless {what}: PLAIN needs "plainUsername" and "plainPassword" ({role})'
            )
        for name, value in (("plainUsername", username), ("plainPassword", password)):
            if not 0 < len(value.encode()) <= 255:
                raise OptionError(f'brokerless {what}: option "{name}" must be 1 to 255 bytes')
        return cls("PLAIN", server, username=username, password=password)

    def _credentials(self) -> tuple[str, str]:
        """PLAIN's username and password (from_options sets both for PLAIN)."""
        assert self.username is not None and self.password is not None
        return self.username, self.password

    def apply(self, sock: zmq.SyncSocket, context: zmq.SyncContext) -> ThreadAuthenticator | None:
        """Set these options on ``sock`` (before it binds or connects); returns the ZAP handler
        started in ``context`` for a PLAIN server (stop it after ``sock`` closes)."""
        if self.mechanism == "CURVE":
            sock.curve_secretkey = self.secret_key
            sock.curve_publickey = self.public_key
            if self.server:
                sock.curve_server = 1
            else:
                sock.curve_serverkey = self.server_key
        elif self.mechanism == "PLAIN" and not self.server:
            username, password = self._credentials()
            sock.plain_username = username.encode()
            sock.plain_password = password.encode()
        if self.zap_domain is not None:
            sock.zap_domain = self.zap_domain.encode()
        if self.mechanism != "PLAIN" or not self.server:
            return None
        sock.plain_server = 1
        authenticator = ThreadAuthenticator(context)
        username, password = self._credentials()
        assert self.zap_domain is not None, "from_options gives a PLAIN server its domain"
        authenticator.configure_plain(self.zap_domain, {username: password})
        authenticator.start()
        return authenticator


def _key(given: Mapping[str, str], name: str, what: str) -> bytes | None:
    """The 32 octets of the Z85 key option ``name``, or None when it is not given."""
    raw = given.get(name)
    if raw is None:
        return None
    try:
        if len(raw) != 40:
            raise ValueError
        return z85.decode(raw.encode("ascii"))
    except (ValueError, UnicodeEncodeError):
        shown = f"has {len(raw)}" if len(raw) != 40 else "is not Z85"
        raise OptionError(
            f'brokerless {what}: option "{name}" must be a CURVE key in Z85, 40 characters '
            f"(zmq.curve_keypair() makes a pair): this one {shown}"
        ) from None
