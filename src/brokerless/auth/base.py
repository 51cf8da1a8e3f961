"""The ZAP handler's policy (pyzmq's ``zmq.auth.Authenticator``): who may connect, and as whom.

Theory of operation
-------------------
An :class:`Authenticator` binds a REP socket at ``inproc://zeromq.zap.01`` in its context
(:meth:`~Authenticator.start`); every server socket of that context that authenticates (PLAIN,
CURVE, or NULL with a ZAP_DOMAIN) then sends it one ZAP request (RFC 27) per handshake and waits
for the reply.  The class only decides; reading the requests is left to a subclass that serves
the socket: :class:`~brokerless.auth.thread.ThreadAuthenticator` (a thread of its own),
:class:`~brokerless.auth.asyncio.AsyncioAuthenticator` (a task on the running asyncio loop), or
the program, which passes each request to :meth:`~Authenticator.handle_zap_message`.

The decision, as pyzmq makes it:

1. The address.  ``allow()`` lists the only addresses that may connect; ``deny()`` lists
   addresses that may not (one or the other, never both).  A denied address is refused whatever
   the mechanism.
2. The mechanism.  NULL: accepted (user id "anonymous").  PLAIN: the username and password must
   be in ``configure_plain``'s table for the request's domain (user id: the username).  CURVE:
   any client key after ``configure_curve(location=CURVE_ALLOW_ANY)``, else the callback of
   ``configure_curve_callback`` says, else the key must be among the certificates that
   ``configure_curve`` loaded for the domain (user id: :meth:`~Authenticator.curve_user_id`).
   An empty domain reads as ``"*"``.  brokerless has no GSSAPI, and refuses any other mechanism.

Replies are 200 (with the user id), 400 (refused, with the reason), or 500 when the policy
itself failed (a CURVE callback raised): the connection is refused and the handler goes on.
Passwords never reach the log.
"""

from __future__ import annotations

import hmac
import inspect
import logging
import os
from typing import Any

from ..constants import SocketType
from ..context import Context
from ..socket import Socket, SyncSocket
from ..utils import z85
from ..zmtp.mechanisms.zap import ZAP_ENDPOINT
from .certs import load_certificates

#: ``configure_curve``'s location that lets every CURVE client in.
CURVE_ALLOW_ANY = "*"
#: The ZAP version this handler speaks (RFC 27).
VERSION = b"1.0"

_OK, _REFUSED, _FAILED = b"200", b"400", b"500"


class Authenticator:
    """ZAP authentication for the server sockets of a context (see the module's docstring).

    ``context`` defaults to ``Context.instance()``; ``encoding`` decodes the request's text
    frames (domain, address, PLAIN credentials) and encodes user ids; ``log`` defaults to the
    ``zmq.auth`` logger, as in pyzmq.
    """

    context: Context[Any]
    encoding: str
    allow_any: bool
    credentials_providers: dict[str, Any]
    zap_socket: SyncSocket | None
    passwords: dict[str, dict[str, str]]
    certs: dict[str, dict[bytes, Any]]
    log: Any

    def __init__(
        self, context: Context[Any] | None = None, encoding: str = "utf-8", log: Any = None
    ) -> None:
        self.context = context or Context.instance()
        self.encoding = encoding
        self.allow_any = False
        self.credentials_providers = {}
        self.zap_socket = None
        self._allowed: set[str] = set()
        self._denied: set[str] = set()
        self.passwords = {}
        self.certs = {}
        self.log = log or logging.getLogger("zmq.auth")

    # -- the ZAP socket ---------------------------------------------------------------------

    def start(self) -> None:
        """Bind the ZAP socket (ZMQError EADDRINUSE when the context already has a handler)."""
        sock = self.context.socket(SocketType.REP, socket_class=Socket)
        sock.linger = 1
        sock.bind(ZAP_ENDPOINT)
        self.zap_socket = sock
        self.log.debug("Starting")

    def stop(self) -> None:
        """Close the ZAP socket: the context's servers then go on without a handler."""
        if self.zap_socket is not None:
            self.zap_socket.close()
        self.zap_socket = None

    # -- policy -----------------------------------------------------------------------------

    def allow(self, *addresses: str) -> None:
        """Let only these IP addresses (and others allowed so far) connect; the mechanism's
        check still applies to PLAIN and CURVE.  ValueError after ``deny``."""
        if self._denied:
            raise ValueError("Only use allow or deny, not both")
        self.log.debug("Allowing %s", ",".join(addresses))
        self._allowed.update(addresses)

    def deny(self, *addresses: str) -> None:
        """Refuse these IP addresses, whatever the mechanism.  ValueError after ``allow``."""
        if self._allowed:
            raise ValueError("Only use allow or deny, not both")
        self.log.debug("Denying %s", ",".join(addresses))
        self._denied.update(addresses)

    def configure_plain(self, domain: str = "*", passwords: dict[str, str] | None = None) -> None:
        """PLAIN for ``domain`` ("*": every domain): ``passwords`` maps username → password.
        The table is kept by reference, so changes to it apply to later handshakes."""
        if passwords:
            self.passwords[domain] = passwords
        self.log.debug("Configure plain: %s", domain)

    def configure_curve(self, domain: str = "*", location: str | os.PathLike[str] = ".") -> None:
        """CURVE for ``domain`` ("*": every domain): clients whose public key has a certificate
        (``*.key``) in the directory ``location``, read now (call again after changing it);
        ``CURVE_ALLOW_ANY`` lets every client in.  A directory that cannot be read is logged as
        an error (as pyzmq does) and leaves the domain's keys as they were."""
        self.log.debug("Configure curve: %s[%s]", domain, location)
        if location == CURVE_ALLOW_ANY:
            self.allow_any = True
            return
        self.allow_any = False
        try:
            self.certs[domain] = load_certificates(location)
        except (OSError, ValueError) as e:
            self.log.error("Failed to load CURVE certs from %s: %s", location, e)

    def configure_curve_callback(self, domain: str = "*", credentials_provider: Any = None) -> None:
        """CURVE for ``domain``, decided by ``credentials_provider.callback(domain, key)``
        (``key``: the client's public key, 40 Z85 characters as bytes) returning a truth
        value, or an awaitable of one."""
        self.allow_any = False
        if credentials_provider is None:
            self.log.error("None credentials_provider provided for domain:%s", domain)
            return
        self.credentials_providers[domain] = credentials_provider

    def configure_gssapi(self, domain: str = "*", location: str | None = None) -> None:
        """GSSAPI needs libzmq built with it; brokerless has no GSSAPI mechanism."""
        raise NotImplementedError(
            "brokerless has no GSSAPI mechanism (zmq.has('gssapi') is False): use CURVE"
        )

    def curve_user_id(self, client_public_key: bytes) -> str:
        """The User-Id of an accepted CURVE client (its 32-octet public key given): by default
        the key in Z85.  Override (or assign) to map keys to names."""
        return z85.encode(client_public_key).decode("ascii")

    # -- requests ---------------------------------------------------------------------------

    async def handle_zap_message(self, msg: list[bytes]) -> None:
        """Answer one ZAP request (its frames) on the ZAP socket."""
        if len(msg) < 6:
            self.log.error("Invalid ZAP message, not enough frames: %r", msg)
            # Answered even without a request id: a REP socket that does not reply reads no more.
            request_id = msg[1] if len(msg) > 1 else b""
            self._send_zap_reply(request_id, _REFUSED, b"Not enough frames")
            return
        version, request_id, domain, address, identity, mechanism = msg[:6]
        if version != VERSION:
            self.log.error("Invalid ZAP version: %r", msg)
            self._send_zap_reply(request_id, _REFUSED, b"Invalid version")
            return
        self.log.debug(
            "version: %r, request_id: %r, domain: %r, address: %r, identity: %r, mechanism: %r",
            version,
            request_id,
            domain,
            address,
            identity,
            mechanism,
        )
        try:
            status, text, user_id = await self._decide(
                domain.decode(self.encoding, "replace"),
                address.decode(self.encoding, "replace"),
                mechanism,
                msg[6:],
            )
        except Exception:
            self.log.exception(
                "ZAP policy failed on a %s request", mechanism.decode("ascii", "replace")
            )
            status, text, user_id = _FAILED, b"Internal error", ""
        self._send_zap_reply(request_id, status, text, user_id)

    async def _decide(
        self, domain: str, address: str, mechanism: bytes, credentials: list[bytes]
    ) -> tuple[bytes, bytes, str]:
        """(status, status text, user id) for one request.  PLAIN's and CURVE's decisions are
        pyzmq's hooks -- ``_authenticate_plain``, ``_authenticate_curve`` -- so a subclass that
        overrides one (a password store, a revocation list) decides, as with pyzmq."""
        refused = self._refused_address(address)
        if refused is not None:
            return _REFUSED, refused, ""
        if mechanism == b"NULL":
            self.log.debug("ALLOWED (NULL)")
            return _OK, b"OK", "anonymous"
        if mechanism == b"PLAIN":
            if len(credentials) != 2:
                self.log.error("Invalid PLAIN credentials: %r", credentials)
                return _REFUSED, b"Invalid credentials", ""
            username, password = (c.decode(self.encoding, "replace") for c in credentials)
            allowed, reason = self._authenticate_plain(domain, username, password)
            return (_OK, b"OK", username) if allowed else (_REFUSED, reason, "")
        if mechanism == b"CURVE":
            if len(credentials) != 1 or len(credentials[0]) != 32:
                self.log.error("Invalid CURVE credentials: %r", credentials)
                return _REFUSED, b"Invalid credentials", ""
            key = credentials[0]
            allowed, reason = await self._authenticate_curve(domain, key)
            return (_OK, b"OK", self.curve_user_id(key)) if allowed else (_REFUSED, reason, "")
        # GSSAPI too (pyzmq lets it in unchecked): brokerless has no GSSAPI to vouch for it.
        self.log.debug("DENIED (unsupported mechanism %r)", mechanism)
        return _REFUSED, b"Unsupported mechanism", ""

    def _refused_address(self, address: str) -> bytes | None:
        """Why ``address`` may not connect, or None."""
        if self._allowed:
            if address in self._allowed:
                self.log.debug("PASSED (allowed) address=%s", address)
                return None
            self.log.debug("DENIED (not allowed) address=%s", address)
            return b"Address not allowed"
        if address in self._denied:
            self.log.debug("DENIED (denied) address=%s", address)
            return b"Address denied"
        if self._denied:
            self.log.debug("PASSED (not denied) address=%s", address)
        return None

    def _authenticate_plain(self, domain: str, username: str, password: str) -> tuple[bool, bytes]:
        """PLAIN's decision (pyzmq's hook): (allowed, reason).  An empty domain is ``*``."""
        domain = domain or "*"
        reason: bytes
        if not self.passwords:
            reason = b"No passwords defined"
        elif domain not in self.passwords:
            reason = b"Invalid domain"
        elif username not in self.passwords[domain]:
            reason = b"Invalid username"
        elif not hmac.compare_digest(
            password.encode(self.encoding, "replace"), self._stored(domain, username)
        ):
            reason = b"Invalid password"
        else:
            self.log.debug("ALLOWED (PLAIN) domain=%s username=%s", domain, username)
            return True, b"OK"
        self.log.debug("DENIED (PLAIN) domain=%s username=%s: %s", domain, username, reason)
        return False, reason

    def _stored(self, domain: str, username: str) -> bytes:
        """The password configured for ``username``, as octets (given as text, or as bytes:
        pyzmq's compares bytes with the text it decoded, so it refuses every one with 400;
        here they count, and nothing is refused with 500 for it)."""
        stored: str | bytes = self.passwords[domain][username]
        return stored if isinstance(stored, bytes) else stored.encode(self.encoding, "replace")

    async def _authenticate_curve(self, domain: str, client_key: bytes) -> tuple[bool, bytes]:
        """CURVE's decision on the client's public key, 32 octets (pyzmq's hook): (allowed,
        reason).  An empty domain is ``*``."""
        domain = domain or "*"
        if self.allow_any:
            self.log.debug("ALLOWED (CURVE allow any client)")
            return True, b"OK"
        z85_key = z85.encode(client_key)
        reason: bytes | None
        if self.credentials_providers:
            how = "CURVE auth_callback"
            provider = self.credentials_providers.get(domain)
            if provider is None:
                reason = b"Unknown domain"
            else:
                known = provider.callback(domain, z85_key)
                if inspect.isawaitable(known):
                    known = await known
                reason = None if known else b"Unknown key"
        else:
            how = "CURVE"
            keys = self.certs.get(domain)
            if keys is None:
                reason = b"Unknown domain"
            else:
                reason = None if keys.get(z85_key) else b"Unknown key"
        verdict = "ALLOWED" if reason is None else f"DENIED {reason.decode()}"
        self.log.debug("%s (%s) domain=%s client_key=%s", verdict, how, domain, z85_key)
        return (True, b"OK") if reason is None else (False, reason)

    def _send_zap_reply(
        self,
        request_id: bytes,
        status_code: bytes,
        status_text: bytes,
        user_id: str = "anonymous",
    ) -> None:
        """Send the ZAP reply (no metadata); the user id goes only with status 200."""
        user = user_id.encode(self.encoding, "replace") if status_code == _OK else b""
        self.log.debug("ZAP reply code=%s text=%s", status_code, status_text)
        if self.zap_socket is None:
            raise RuntimeError("the Authenticator is not started: no ZAP socket to reply on")
        self.zap_socket.send_multipart([VERSION, request_id, status_code, status_text, user, b""])


__all__ = ["CURVE_ALLOW_ANY", "Authenticator"]
